"""What a user's console shows for `vocadapt adapt` with LAPT on Ray, at tiny size: the pipeline's numbered steps, a
progress bar for LAPT, where Ray's own output went, and nothing from Ray's processes. The lines are counted."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mlflow_store_seed import seed_file
from tests.pipelines.tiny_world import build_source_model, tiny_config_overrides

ROOT = Path(__file__).resolve().parents[2]

# Measured on 2 shared cores at 120 columns (one method, two LAPT steps): 77 lines, the pipeline's steps and tables
# (fertility, results, promotion gates) and 8 lines from libraries outside Ray (DeepSpeed's accelerator notice,
# MLflow creating its tables, the bars of transformers, MLflow's downloads and the corpus reader). With Ray's
# forwarding on (VOCADAPT_RAY_CONSOLE=1) the same run printed at least 30 more, from Ray's processes (18 of them
# "Failed to query Ray Train Controller actor state"), and this test failed on them. Since the promotion gates print
# each estimate with its 95% interval and rule, the quiet run prints 97 lines (measured at 9381807); 115 leaves room
# for a longer temporary path wrapping a line, not for Ray's 30 or more.
MAX_LINES = 115
RAY_NOISE = ("(pid=", "(RayTrainWorker", "(TrainController", "core_worker", "raylet", "Failed to query",
             "gcs_client", "Started a local Ray instance")


@pytest.mark.timeout(600)
def test_a_tiny_adapt_prints_its_steps_a_progress_bar_and_where_rays_logs_are(tmp_path, fixture_corpora):
    corpora = {key: Path(path) for key, path in fixture_corpora.items()}
    model = build_source_model(tmp_path / "tiny", [corpora["en.train"]])
    overrides = tiny_config_overrides(model, corpora, tmp_path, **{
        "init.methods": "[fvt]", "init.helper": "null", "lapt.runner": "ray", "tracking.tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}"})
    seed_file(tmp_path / "mlflow.db")  # a migrated empty store: the command skips MLflow's migrations
    env = {**os.environ, "COLUMNS": "120"}  # a console's width decides how rich wraps; fixed for the count
    for name in ("RAY_ADDRESS", "VOCADAPT_RAY_CONSOLE", "MLFLOW_TRACKING_URI"):
        env.pop(name, None)
    run = subprocess.run(
        [str(Path(sys.executable).with_name("vocadapt")), "adapt", str(ROOT / "configs" / "italian-smollm2.yaml"),
         *[arg for override in overrides for arg in ("--set", override)]],
        cwd=tmp_path, env=env, capture_output=True, timeout=580)
    console = (run.stdout + run.stderr).decode("utf-8", errors="replace")  # bytes: \r redraws stay on their line
    lines = console.split("\n")
    assert run.returncode == 0, console[-4000:]

    for step in ("1. corpus checks", "2. target tokenizer", "3. fertility", "method fvt"):
        assert step in console, (step, console)
    assert re.search(r"LAPT: 100%.*2/2", console), console  # the driver's bar reached the last step
    logs = re.search(r"Ray's own output \(controller, workers\): (\S+)", console)
    assert logs, console
    folder = Path(logs.group(1))
    assert folder.is_dir() and list(folder.glob("worker-*.out")), f"no worker logs in {folder}"
    noise = [line for line in lines if any(marker in line for marker in RAY_NOISE)]
    assert not noise, noise
    assert len(lines) <= MAX_LINES, f"{len(lines)} console lines:\n{console}"
