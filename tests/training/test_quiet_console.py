"""A LAPT run on Ray Train keeps the console to the pipeline's own lines: Ray's output stays in its log folder,
progress is a driver-side bar, and a failing worker's error still reaches the user with where the logs are."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(300)

# What the console may show for the two runs: the script's two marker lines, the failure's message (Ray's error
# snippet: the worker's traceback) and the log folder, a few lines from libraries outside Ray (DeepSpeed's
# accelerator notice, a tqdm bar). Measured on 2 cores: 13 lines; with Ray's forwarding on (VOCADAPT_RAY_CONSOLE=1)
# the same script printed 114, 101 of them from Ray's processes. 30 leaves room for a longer traceback.
MAX_LINES = 30


def test_a_lapt_run_prints_progress_and_errors_but_not_rays_noise(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    env.pop("VOCADAPT_RAY_CONSOLE", None)
    run = subprocess.run([sys.executable, "-m", "tests.training.quiet_console_run", str(tmp_path)], cwd=ROOT, env=env,
                         capture_output=True, timeout=280)
    console = (run.stdout + run.stderr).decode("utf-8", errors="replace")  # bytes: text mode would turn \r into \n
    lines = console.split("\n")  # a progress bar's redraws (\r) stay on one line, as on a terminal
    assert run.returncode == 0, console[-3000:]
    assert "=== trained 4 steps" in console
    assert "LAPT" in console and "4/4" in console, console  # the driver's progress bar reached the last step
    assert "the worker broke on purpose" in console and "worker-*.err" in console  # the error and its logs
    assert console.count("Ray's own output (controller, workers): ") == 2  # where the logs are, as each run starts
    assert not [line for line in lines if "Failed to query" in line or "(pid=" in line or "core_worker" in line]
    assert len(lines) <= MAX_LINES, f"{len(lines)} console lines:\n{console}"
