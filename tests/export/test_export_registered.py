"""``vocadapt export models:/NAME/VERSION --format gguf`` against a real MLflow server: the version's checkpoint is
downloaded and verified, converted, and the GGUF is logged to the version's run with its sha256 as a version tag;
``vocadapt promote --require-gguf`` refuses a version without it and moves no alias."""

from __future__ import annotations

import hashlib
from pathlib import Path

from typer.testing import CliRunner

NAME = "vocadapt-it-gguf"


def test_exporting_a_registered_version_logs_the_gguf_and_promotion_can_require_it(tiny_adapted_models,
                                                                                   gguf_converter, tmp_path):
    import mlflow

    from tests.mlflow_server import mlflow_server
    from tests.registry.tiny_registry_world import credentials, lineage, log_adapted_runs
    from vocadapt.cli.app import app
    from vocadapt.platform.registry.model_versions import register_model
    from vocadapt.platform.tracking import Tracker

    out = tmp_path / "exported.gguf"
    (tmp_path / "server").mkdir()
    runner = CliRunner()
    with credentials(None, None), mlflow_server(tmp_path / "server") as url:
        tracker = Tracker(url, "gguf-export-tests")
        _, child = log_adapted_runs(tracker)
        registered = register_model(tracker, child, tiny_adapted_models["replace"], NAME, lineage=lineage())
        client = mlflow.MlflowClient(url, registry_uri=url)

        def promote(quant: str):
            return runner.invoke(app, ["promote", NAME, "--version", str(registered.version), "--require-gguf",
                                       quant, "--tracking-uri", url])

        def champion():
            return client.get_registered_model(NAME).aliases.get("champion")

        refused = promote("f16")
        assert refused.exit_code != 0
        assert "no exported GGUF" in refused.output and "vocadapt export models:/" in refused.output, refused.output
        assert champion() is None

        result = runner.invoke(app, ["export", f"models:/{NAME}/{registered.version}", "--format", "gguf",
                                     "--tracking-uri", url, "--out", str(out)])
        assert result.exit_code == 0, result.output
        version = client.get_model_version(NAME, str(registered.version))
        logged = Path(client.download_artifacts(version.run_id, "gguf/exported.gguf", str(tmp_path / "back")))

        other_quant = promote("q4_k_m")  # an f16 file is there, not the q4_k_m one asked for
        assert other_quant.exit_code != 0 and "q4_k_m" in other_quant.output, other_quant.output
        client.set_model_version_tag(NAME, str(registered.version), "vocadapt.gguf.q8_0.sha256", "0" * 64)
        client.set_model_version_tag(NAME, str(registered.version), "vocadapt.gguf.q8_0.artifact",
                                     f"runs:/{version.run_id}/gguf/gone.gguf")
        tagged_only = promote("q8_0")  # tagged, but the file is not among the run's artifacts
        assert tagged_only.exit_code != 0 and "no such artifact" in tagged_only.output, tagged_only.output
        assert champion() is None

        accepted = promote("f16")
        assert accepted.exit_code == 0, accepted.output
        assert f"runs:/{version.run_id}/gguf/exported.gguf" in accepted.output
        assert champion() == str(registered.version)
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    assert version.tags["vocadapt.gguf.f16.sha256"] == digest
    assert version.tags["vocadapt.gguf.f16.artifact"] == f"runs:/{version.run_id}/gguf/exported.gguf"
    assert hashlib.sha256(logged.read_bytes()).hexdigest() == digest
    assert "pre-tokenizer gpt-2" in result.output
