"""`vocadapt evaluate` end to end on tiny models: a registered model (models:/name@alias) scored on the offline
suite, side by side with its source model, logged to a SQLite MLflow store with lineage tags; bad input fails
before any run exists."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from vocadapt.cli.app import app

pytestmark = pytest.mark.timeout(600)


@pytest.fixture()
def registered(tmp_path, adapted_model_dir, monkeypatch):
    from vocadapt.platform.tracking import Tracker

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = Tracker(uri, "tiny-eval", artifact_root=tmp_path / "artifacts")
    with tracker.run("tiny/fvt", tags={"vocadapt.source_model": "tiny-source"}) as run:
        model_uri = tracker.log_model_directory(run.info.run_id, adapted_model_dir)
    tracker.register(model_uri, "vocadapt-it-tiny", alias="candidate", run_id=run.info.run_id,
                     tags={"vocadapt.method": "fvt", "vocadapt.source_model": "tiny-source"})
    return uri, run.info.run_id


def test_evaluate_registered_model_logs_every_score(tmp_path, registered, held_out, quick_suite_overrides,
                                                    source_model_dir, monkeypatch):
    from mlflow.tracking import MlflowClient

    from vocadapt.pipelines.evaluate import EvaluationRequest, run_evaluate

    uri, version_run_id = registered
    request = EvaluationRequest(
        model="models:/vocadapt-it-tiny@candidate", compare_to=str(source_model_dir), helper=str(source_model_dir),
        suite_overrides=quick_suite_overrides | {"harness.limit": "4", "generation.repeats": "2"}, tracking_uri=uri, held_out=held_out,
        work_dir=tmp_path / "work",
    )
    result = run_evaluate(request)
    client = MlflowClient(uri)
    run = client.get_run(result.run_id)
    metrics, tags = run.data.metrics, run.data.tags
    assert client.get_experiment(run.info.experiment_id).name == "tiny-eval"
    assert tags["vocadapt.registered_model"] == "vocadapt-it-tiny" and tags["vocadapt.model_alias"] == "candidate"
    assert tags["vocadapt.model_version"] == "1" and tags["vocadapt.method"] == "fvt"
    for prefix in ("", "source_model."):
        assert 0 <= metrics[f"{prefix}benchmark.vocadapt_cloze_it.acc_bytes"] <= 1
        assert 0 <= metrics[f"{prefix}benchmark.vocadapt_translation_en_it.chrf"] <= 100
        assert metrics[f"{prefix}bpb.it"] > 0 and metrics[f"{prefix}parameters.total"] > 0
        assert metrics[f"{prefix}generation.vocadapt_translation_en_it.tokens_per_second"] > 0
    assert 0 <= metrics["generation.vocadapt_translation_en_it.percent_generated_new"] <= 100
    assert -1 <= metrics["generation.same_text_token_saving"] < 1  # what the saving gate reads
    assert metrics["speed_up.characters_per_second"] > 0
    assert metrics["speed_up.vocadapt_translation_it_en.examples_per_second"] > 0
    similarity = [key for key in metrics if key.startswith("similarity.")]
    assert len(similarity) == 1 and -100 <= metrics[similarity[0]] <= 100
    artifacts = {a.path for a in client.list_artifacts(result.run_id, "similarity")}
    assert artifacts == {"similarity/similarity.json", "similarity/similarity.png"}
    # the promotion gates read the version's own run
    gated = client.get_run(version_run_id).data.metrics
    assert "benchmark.vocadapt_cloze_it.acc_bytes" in gated
    assert "source_model.benchmark.vocadapt_cloze_it.acc_bytes" in gated
    # the promise gate's counts: tokens per generated character, the model's and the source model's
    for prefix in ("", "source_model."):
        generated = metrics[f"{prefix}generation.vocadapt_translation_en_it.generated_tokens"]
        characters = metrics[f"{prefix}generation.vocadapt_translation_en_it.generated_characters"]
        assert metrics[f"{prefix}generation.vocadapt_translation_en_it.tokens_per_character"] == \
            pytest.approx(generated / max(characters, 1))
        assert gated[f"{prefix}generation.tokens_per_character"] > 0


def test_cli_rejects_bad_model_before_any_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["evaluate", "--model", str(tmp_path / "missing")])
    assert result.exit_code == 2
    assert "not a model folder" in " ".join(result.output.split())
    assert not (tmp_path / "mlflow.db").exists()


def test_cli_rejects_unknown_registered_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["evaluate", "--model", "models:/nope@candidate"])
    assert result.exit_code == 2
    assert "not found in the registry" in " ".join(result.output.split())


def test_cli_evaluates_a_folder_and_writes_json(tmp_path, adapted_model_dir, monkeypatch, fixture_corpora):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "summary.json"
    args = ["evaluate", "--model", str(adapted_model_dir), "--experiment", "cli-eval", "--json", str(out),
            "--data", f"it={fixture_corpora['it.validation']}", "--data", f"en={fixture_corpora['en.validation']}",
            "--data", f"it-en={fixture_corpora['it-en.validation']}",
            "--data", f"it-en-shots={fixture_corpora['it-en.train']}", "--country", "DEU"]
    for key, value in {"cloze.items": "8", "translation.items": "3", "translation.max_new_tokens": "4",
                       "generation.examples": "2", "generation.max_new_tokens": "4", "bits_per_byte.documents": "4",
                       "harness.limit": "3"}.items():
        args += ["--set", f"{key}={value}"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(out.read_text())
    assert "benchmark.vocadapt_cloze_en.acc_bytes" in summary["metrics"]
    assert not any(key.startswith("speed_up") for key in summary["metrics"])  # no --compare-to
    # the evaluation's energy and CO2, on the grid --country named, and nothing written by codecarbon
    from codecarbon.input import DataSource
    from mlflow.tracking import MlflowClient

    from vocadapt.platform.tracking import resolve_tracking_uri

    run = MlflowClient(resolve_tracking_uri()).get_run(summary["run_id"])
    energy = run.data.metrics
    assert energy["energy.evaluation.kwh"] > 0 and energy["energy.total.kwh"] == energy["energy.evaluation.kwh"]
    grid = DataSource().get_global_energy_mix_data()["DEU"]["carbon_intensity"]
    assert energy["emissions.evaluation.kg_co2eq"] * 1000 / energy["energy.evaluation.kwh"] == pytest.approx(grid)
    assert run.data.tags["vocadapt.energy_country"] == "DEU" and "cpu:" in run.data.tags["vocadapt.energy_mode"]
    assert not [path for path in tmp_path.rglob("*") if "emission" in path.name or "codecarbon" in path.name]
