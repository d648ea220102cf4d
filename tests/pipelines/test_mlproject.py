"""`mlflow run` drives the entry points: MLproject parses, names real commands, and `adapt` runs end to end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.pipelines.tiny_world import build_source_model, tiny_config_overrides

ROOT = Path(__file__).resolve().parents[2]


def test_mlproject_entry_points_name_real_commands():
    from typer.testing import CliRunner

    from vocadapt.cli.app import app

    project = yaml.safe_load((ROOT / "MLproject").read_text())
    assert {"main", "adapt", "lapt", "sweep", "evaluate"} <= set(project["entry_points"])
    for name, entry in project["entry_points"].items():
        command = entry["command"]
        sub = command.split()[1] if command.startswith("vocadapt ") else command.split("mlproject ")[1].split()[0]
        result = CliRunner().invoke(app, [sub, "--help"])
        assert result.exit_code == 0, (name, result.output)


@pytest.mark.timeout(900)
def test_mlflow_run_adapt_entry_point(tmp_path, fixture_corpora):
    corpora = {key: Path(path) for key, path in fixture_corpora.items()}
    model = build_source_model(tmp_path / "tiny", [corpora["en.train"]])
    overrides = tiny_config_overrides(model, corpora, tmp_path, **{"lapt.enabled": "false",
                                                                   "init.methods": "[fvt]"})
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    result = subprocess.run(
        [str(Path(sys.executable).with_name("mlflow")), "run", str(ROOT), "-e", "adapt", "--env-manager", "local",
         "--experiment-name", "mlproject-test", "-P", "config=configs/italian-smollm2.yaml",
         "-P", "overrides=" + " ".join(overrides)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=850,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    import mlflow

    client = mlflow.tracking.MlflowClient(env["MLFLOW_TRACKING_URI"])
    experiment = client.get_experiment_by_name("tiny-e2e")
    runs = client.search_runs([experiment.experiment_id])
    assert any(r.data.params.get("method") == "fvt" for r in runs)
    assert all(r.info.status == "FINISHED" for r in runs)
