"""``vocadapt export models:/NAME/VERSION --format gguf`` against a real MLflow server: the version's checkpoint is
downloaded and verified, converted, and the GGUF is logged to the version's run with its sha256 as a version tag."""

from __future__ import annotations

import hashlib
from pathlib import Path

from typer.testing import CliRunner

NAME = "vocadapt-it-gguf"


def test_exporting_a_registered_version_logs_the_gguf_to_its_run(tiny_adapted_models, gguf_converter, tmp_path):
    import mlflow

    from tests.mlflow_server import mlflow_server
    from tests.registry.tiny_registry_world import credentials, lineage, log_adapted_runs
    from vocadapt.cli.app import app
    from vocadapt.platform.registry import register_model
    from vocadapt.platform.tracking import Tracker

    out = tmp_path / "exported.gguf"
    (tmp_path / "server").mkdir()
    with credentials(None, None), mlflow_server(tmp_path / "server") as url:
        tracker = Tracker(url, "gguf-export-tests")
        _, child = log_adapted_runs(tracker)
        registered = register_model(tracker, child, tiny_adapted_models["replace"], NAME, lineage=lineage())
        result = CliRunner().invoke(app, ["export", f"models:/{NAME}/{registered.version}", "--format", "gguf",
                                          "--tracking-uri", url, "--out", str(out)])
        assert result.exit_code == 0, result.output
        client = mlflow.MlflowClient(url, registry_uri=url)
        version = client.get_model_version(NAME, str(registered.version))
        logged = Path(client.download_artifacts(version.run_id, "gguf/exported.gguf", str(tmp_path / "back")))
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    assert version.tags["vocadapt.gguf.f16.sha256"] == digest
    assert version.tags["vocadapt.gguf.f16.artifact"] == f"runs:/{version.run_id}/gguf/exported.gguf"
    assert hashlib.sha256(logged.read_bytes()).hexdigest() == digest
    assert "pre-tokenizer gpt-2" in result.output
