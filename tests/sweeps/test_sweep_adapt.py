"""End to end: a two-trial sweep of the real adapt pipeline (tiny model, fixture corpora, LAPT on Ray Train inside
Tune trials), then promotion of its best through the gates, reading the metrics the pipeline logged."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.pipelines.tiny_world import build_source_model, tiny_config_overrides
from vocadapt.platform.config import apply_override

pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]


@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    os.environ["HF_HUB_OFFLINE"] = "1"
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


OUT_OF_DOMAIN_ITALIAN = ["Chi dorme non piglia pesci, ma almeno riposa bene la notte.",
                         "La città di Roma conta molti abitanti e ancora più gatti.",
                         "Domani andremo al mercato a comprare frutta e verdura fresca.",
                         "Un computer fa esattamente quello che gli dici, purtroppo."]
OUT_OF_DOMAIN_ENGLISH = ["A fool and his money are soon parted, said nobody rich.",
                         "The quick brown fox never learned why the lazy dog slept.",
                         "Anything that can go wrong will go wrong, and at the worst time.",
                         "Time flies like an arrow; fruit flies like a banana."]


def test_sweep_of_adapt_nests_pipeline_runs_under_trials_and_its_best_meets_the_gates_or_is_refused(
    ray_cluster, tmp_path, fixture_corpora, monkeypatch,
):
    import mlflow

    from vocadapt.pipelines.sweep import run_sweep
    from vocadapt.platform.registry.model_versions import promote
    from vocadapt.platform.sweeps.tune import SweepConfig

    monkeypatch.chdir(tmp_path)
    corpora = {key: Path(path) for key, path in fixture_corpora.items()}
    model = build_source_model(tmp_path / "source", [corpora["en.train"]])
    # out-of-domain text no training saw, what the default bits-per-byte gates read
    (tmp_path / "ood-it.txt").write_text("\n".join(OUT_OF_DOMAIN_ITALIAN) + "\n", encoding="utf-8")
    (tmp_path / "ood-en.txt").write_text("\n".join(OUT_OF_DOMAIN_ENGLISH) + "\n", encoding="utf-8")
    base: dict = {}
    for assignment in tiny_config_overrides(model, corpora, tmp_path, **{
            "tracking.tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}", "tracking.experiment": "adapt-sweep",
            "lapt.runner": "ray",  # the suite's sweep with Ray Train inside Tune trials, as on a cluster
            "evaluation.out_of_domain": "true", "evaluation.out_of_domain_text":
            f"{{it: [{tmp_path / 'ood-it.txt'}], en: [{tmp_path / 'ood-en.txt'}]}}"}):
        apply_override(base, assignment)
    sweep = SweepConfig.model_validate({
        "name": "adapt-sweep", "base": base, "search_space": {"init.methods": {"grid": ["random", "fvt"]}},
        "scheduler": {"kind": "fifo", "max_t": 2}, "budget": {"max_concurrent_trials": 1},
        "storage_path": str(tmp_path / "ray"), "registered_model": "tiny-adapt-sweep",
    })
    result = run_sweep(sweep)
    assert [row["status"] for row in result.rows] == ["FINISHED", "FINISHED"], result.rows

    client = mlflow.tracking.MlflowClient(result.tracking_uri, registry_uri=result.tracking_uri)
    runs = {run.info.run_id: run for run in client.search_runs(
        [client.get_experiment_by_name("adapt-sweep").experiment_id])}
    assert all(run.info.status == "FINISHED" for run in runs.values())
    for row in result.rows:
        method_run = runs[row["model_run_id"]]
        adapt_run = runs[method_run.data.tags["mlflow.parentRunId"]]
        trial_run = runs[adapt_run.data.tags["mlflow.parentRunId"]]
        assert trial_run.info.run_id == row["mlflow_run_id"]
        assert trial_run.data.tags["mlflow.parentRunId"] == result.parent_run_id
        assert method_run.data.params["method"] == row["params"]["init.methods"]
    # one trial at a time: the first computes the shared artefacts, the second reuses them, and says so
    trial_runs = sorted((runs[row["mlflow_run_id"]] for row in result.rows), key=lambda run: run.info.start_time)
    for kind in ("tokenizer", "source_bpb"):
        assert [run.data.tags[f"vocadapt.cache.{kind}"] for run in trial_runs] == ["computed", "reused"], kind
        assert len({run.data.tags[f"vocadapt.cache.{kind}_key"] for run in trial_runs}) == 1
    assert not any("vocadapt.cache.helper" in run.data.tags for run in trial_runs)  # random and fvt need none
    # the corpus expectation suite ran once, in the driver, and is saved with the sweep's run; trials reuse it
    assert [run.data.tags["vocadapt.cache.corpus_expectations"] for run in trial_runs] == ["reused", "reused"]
    sweep_run = runs[result.parent_run_id]
    assert sweep_run.data.metrics["corpus.expectations_evaluated"] == 20
    assert sweep_run.data.metrics["corpus.expectations_passed"] == 20
    checked = json.loads(Path(client.download_artifacts(result.parent_run_id, "corpus_checks/expectations.json",
                                                        str(tmp_path / "checks"))).read_text())
    assert checked["success"] and checked["corpora"]["target training"]["lines"] == 400
    assert (tmp_path / "ray" / "adapt-sweep" / "cache" / "tokenizer").is_dir()

    name, version = result.registered
    tags = client.get_model_version(name, str(version)).tags
    assert tags["vocadapt.method"] == result.best["params"]["init.methods"]
    assert len(tags["vocadapt.tokenizer_sha256"]) == 64 and tags["vocadapt.sweep.run_id"] == result.parent_run_id
    decision = promote(client, name, version)
    measured = {gate.gate: gate for gate in decision.gates}
    for gate in ("target bits per byte", "source-language bits per byte", "target fertility"):
        assert measured[gate].measured is not None and measured[gate].threshold is not None, measured[gate]
    champion = client.get_registered_model(name).aliases.get("champion")
    assert (champion == str(version)) == decision.accepted


def test_sweep_of_adapt_on_a_corpus_failing_an_expectation_stops_before_any_run_or_folder(tmp_path, fixture_corpora,
                                                                                          monkeypatch):
    """Checked once in the driver: no parent run, no Ray, no storage folder, the expectation and its fix named."""
    import mlflow

    from vocadapt.pipelines.sweep import run_sweep
    from vocadapt.platform.data.corpus_checks import CorpusExpectationError
    from vocadapt.platform.sweeps.tune import SweepConfig

    monkeypatch.chdir(tmp_path)
    corpora = {key: Path(path) for key, path in fixture_corpora.items()}
    lines = corpora["it.train"].read_text(encoding="utf-8").splitlines()[:100]
    repeated = tmp_path / "it-repeated.txt"
    repeated.write_text("\n".join(line for line in lines for _ in range(3)) + "\n", encoding="utf-8")
    model = tmp_path / "no-model-needed"  # the corpus check fails before any model is read
    model.mkdir()
    base: dict = {}
    for assignment in tiny_config_overrides(model, corpora, tmp_path, **{
            "corpus.train": f"[{repeated}]", "tracking.tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}",
            "tracking.experiment": "adapt-sweep"}):
        apply_override(base, assignment)
    sweep = SweepConfig.model_validate({
        "name": "bad-corpus", "base": base, "search_space": {"init.methods": {"grid": ["random", "fvt"]}},
        "scheduler": {"kind": "fifo", "max_t": 2}, "storage_path": str(tmp_path / "ray"),
    })
    with pytest.raises(CorpusExpectationError) as caught:
        run_sweep(sweep)
    message = str(caught.value)
    assert "expect_column_proportion_of_unique_values_to_be_between on text" in message
    assert "corpus.max_duplicate_share" in message and str(repeated) in message
    assert not (tmp_path / "ray").exists() and not (tmp_path / "runs").exists()
    if (tmp_path / "mlflow.db").exists():
        client = mlflow.tracking.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
        assert not client.search_runs([e.experiment_id for e in client.search_experiments()])
