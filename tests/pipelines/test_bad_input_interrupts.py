"""Ctrl-C and internal errors, in every command that works: a real SIGINT to a real ``vocadapt adapt`` process
(its MLflow runs end KILLED, no output folder is left, exit 130), KeyboardInterrupt in ``init``, ``tokenizer
train`` and ``evaluate`` (nothing half-written, exit 130), and an unexpected exception (its traceback in the log
file, one line naming it and the log, exit 1)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.pipelines.bad_input_world import INIT, TRAIN, adapt, cli, mlflow_runs, world  # noqa: F401 (fixture)
from vocadapt.cli.app import app

pytestmark = pytest.mark.timeout(600)


SLOW_ADAPT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from vocadapt.pipelines import adapt

    def slow(*args, **kwargs):  # the first method waits, so the signal arrives mid-run
        Path(sys.argv[1]).write_text("started")
        time.sleep(120)

    adapt._adapt_one_method = slow
    from vocadapt.cli.app import app
    app(sys.argv[2:])
""")


def test_sigint_to_a_real_adapt_process(world, tmp_path):
    """A real SIGINT to a real ``vocadapt adapt`` process (its first method made to wait): exit 130, the parent
    and child runs KILLED, no output folder and no staging folder left."""
    marker = tmp_path / "started"
    env = {**os.environ, "MLFLOW_TRACKING_URI": "", "PYTHONPATH": str(Path(__file__).parents[2])}
    process = subprocess.Popen([sys.executable, "-c", SLOW_ADAPT, str(marker), *adapt()(world, tmp_path)],
                               cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marker.exists(), process.communicate()[0].decode()[-3000:]
    process.send_signal(signal.SIGINT)
    output = process.communicate(timeout=120)[0].decode()
    assert process.returncode == 130, output[-3000:]
    assert "Traceback" not in output
    said = " ".join(output.split())
    assert "interrupted: `vocadapt adapt` stopped" in said and "KILLED" in said and "Kept" in said, said[-2000:]
    assert mlflow_runs(tmp_path / "mlflow.db") == {"tiny": "KILLED", "tiny/fvt": "KILLED"}
    assert not (tmp_path / "runs" / "tiny").exists() or not any((tmp_path / "runs" / "tiny").iterdir())


def test_internal_error_writes_the_traceback_to_a_log_and_prints_one_line(world, tmp_path, monkeypatch):
    from vocadapt.components.tokenizers import params

    def broken(*args, **kwargs):
        raise RuntimeError("an internal failure with s3://KEY:SECRET@bucket/x")

    monkeypatch.setattr(params, "vocabulary_change", broken)
    monkeypatch.setenv("VOCADAPT_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(app, ["params", "--config", str(world.model), "--vocab-size", "100"],
                                catch_exceptions=False)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "SECRET" not in result.output
    logs = list((tmp_path / "home" / "logs").glob("params-*.log"))
    assert len(logs) == 1
    assert str(logs[0]) in result.output
    text = logs[0].read_text()
    assert "Traceback" in text and "RuntimeError: an internal failure" in text and "SECRET" not in text
    assert "internal error" in result.output and "RuntimeError" in result.output


def _interrupt(*args, **kwargs):
    raise KeyboardInterrupt


def test_ctrl_c_in_init_removes_the_half_written_out(world, tmp_path, monkeypatch):
    """Interrupted once the staging folder holds the new shard: no --out and no staging folder are left."""
    from vocadapt.components.surgery import checkpoint

    monkeypatch.setattr(checkpoint, "_copy_side_files", _interrupt)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, cli(*INIT, "--method", "fvt")(world, tmp_path), catch_exceptions=False)
    assert result.exit_code == 130, result.output
    assert "interrupted: `vocadapt init` stopped" in " ".join(result.output.split())
    assert sorted(path.name for path in tmp_path.iterdir()) == []


def test_ctrl_c_in_tokenizer_train_writes_nothing(world, tmp_path, monkeypatch):
    from vocadapt.components.tokenizers import train

    monkeypatch.setattr(train, "wrap_fast", _interrupt)  # after training, before the folder is written
    monkeypatch.chdir(tmp_path)
    args = cli(*TRAIN, "--vocab-size", "260", "--corpus", "{w.small}")(world, tmp_path)
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 130, result.output
    assert "interrupted: `vocadapt tokenizer` stopped" in " ".join(result.output.split())
    assert sorted(path.name for path in tmp_path.iterdir()) == []


def test_ctrl_c_in_evaluate_marks_its_run_killed_and_removes_its_temporary_folder(world, tmp_path, monkeypatch):
    import tempfile

    from vocadapt.pipelines import evaluate

    monkeypatch.setattr(evaluate, "_evaluate_all", _interrupt)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "temporary"))
    (tmp_path / "temporary").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "")
    args = ["evaluate", "--model", str(world.model), "--no-energy", "--experiment", "interrupted",
            "--data", f"it={world.corpora['it.validation']}", "--data", f"en={world.corpora['en.validation']}",
            "--data", f"it-en={world.corpora['it-en.validation']}",
            "--data", f"it-en-shots={world.corpora['it-en.train']}"]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 130, result.output
    assert list(mlflow_runs(tmp_path / "mlflow.db").values()) == ["KILLED"]
    assert "interrupted: `vocadapt evaluate` stopped" in " ".join(result.output.split())
    assert not list((tmp_path / "temporary").iterdir())
