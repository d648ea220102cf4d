"""A tiny sweep on a real local Ray cluster: nested MLflow runs, ASHA stopping a bad trial, a failed trial recorded
while the rest go on, the leaderboard and best configuration on the parent run, the best registered, and resume."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.sweeps.tiny_objective import tiny_objective
from vocadapt.platform.sweeps.tune import SweepConfig

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    # What `mlflow run` does to the driver's environment: the workers started below inherit it.
    os.environ["MLFLOW_RUN_ID"] = "0123456789abcdef0123456789abcdef"
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    yield
    ray.shutdown()
    os.environ.pop("MLFLOW_RUN_ID", None)


def _sweep(tmp_path: Path, methods: list[str], **extra) -> SweepConfig:
    base = {
        "name": "tiny", "target": {"language": "it"}, "corpus": {"train": ["it.txt"], "validation": ["it-val.txt"]},
        "lapt": {"max_steps": 3, "learning_rate": 2.0},
        "tracking": {"experiment": "sweep-tests", "tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}"},
    }
    tree = {
        "name": "tiny-sweep", "base": base, "search_space": {"init.methods": {"grid": methods}, "tokenizer.vocab_size": {"grid": [512]}},
        "scheduler": {"kind": "asha", "grace_period": 1, "reduction_factor": 2, "max_t": 3},
        "budget": {"max_concurrent_trials": 1, "cpus_per_trial": 1},
        "storage_path": str(tmp_path / "ray"), "registered_model": "tiny-sweep-model", **extra,
    }
    return SweepConfig.model_validate(tree)


def _runs(uri: str):
    import mlflow

    client = mlflow.tracking.MlflowClient(uri)
    experiment = client.get_experiment_by_name("sweep-tests")
    return client, client.search_runs([experiment.experiment_id])


def test_sweep_nests_runs_stops_the_bad_trial_records_the_failed_one_and_registers_the_best(
    ray_cluster, tmp_path, monkeypatch,
):
    from vocadapt.pipelines.sweep import run_sweep

    monkeypatch.chdir(tmp_path)
    sweep = _sweep(tmp_path, ["fvt", "random", "broken"], promotion={"source_bpb": {"absolute": 3.0}})
    result = run_sweep(sweep, objective=tiny_objective)

    status = {row["params"]["init.methods"]: row["status"] for row in result.rows}
    assert status == {"fvt": "FINISHED", "random": "STOPPED", "broken": "FAILED"}
    assert result.best["params"] == {"init.methods": "fvt", "tokenizer.vocab_size": 512}
    assert result.best["bpb_target"] < 8.0
    assert "failed on purpose" in next(r["error"] for r in result.rows if r["status"] == "FAILED")

    client, runs = _runs(result.tracking_uri)
    by_id = {run.info.run_id: run for run in runs}
    parent = by_id[result.parent_run_id]
    assert parent.info.status == "FINISHED" and "mlflow.parentRunId" not in parent.data.tags
    trials = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == result.parent_run_id]
    assert {r.data.params["init.methods"]: r.info.status for r in trials} == {
        "fvt": "FINISHED", "random": "KILLED", "broken": "FAILED"}
    assert {r.data.params["tokenizer.vocab_size"] for r in trials} == {"512"}  # not masked as a "token" secret
    # every run is the sweep's parent or below it: nothing flat, nothing left RUNNING, MLFLOW_RUN_ID ignored
    for run in runs:
        assert run.info.status != "RUNNING", run.info.run_name
        ancestor = run
        while "mlflow.parentRunId" in ancestor.data.tags:
            ancestor = by_id[ancestor.data.tags["mlflow.parentRunId"]]
        assert ancestor.info.run_id == result.parent_run_id
    assert "0123456789abcdef0123456789abcdef" not in by_id

    leaderboard = json.loads(client.download_artifacts(result.parent_run_id, "leaderboard.json", str(tmp_path)) and
                             (tmp_path / "leaderboard.json").read_text())
    assert [t["status"] for t in leaderboard["trials"]] == ["FINISHED", "STOPPED", "FAILED"]
    assert parent.data.tags["vocadapt.sweep.best.init.methods"] == "fvt"
    assert parent.data.metrics["best.bpb_target"] == pytest.approx(result.best["bpb_target"])
    best_config = client.download_artifacts(result.parent_run_id, "best_config.yaml", str(tmp_path))
    assert "- fvt" in Path(best_config).read_text()

    name, version = result.registered
    registered = client.get_model_version_by_alias(name, "candidate")
    assert int(registered.version) == version
    assert registered.tags["vocadapt.sweep.run_id"] == result.parent_run_id
    assert registered.tags["vocadapt.sweep.trial_id"] == result.best["trial_id"]
    assert registered.tags["vocadapt.method"] == "fvt"
    # the sweep's promotion gates, recorded for `vocadapt promote` without --gates
    recorded = json.loads(registered.tags["vocadapt.promotion_gates"])
    assert recorded["source_bpb"] == {"absolute": 3.0} and recorded["target_bpb"] == {"relative": 0.0}


def test_sweep_resumes_under_the_same_parent_and_retries_only_the_failed_trial(ray_cluster, tmp_path, monkeypatch):
    from vocadapt.pipelines.sweep import run_sweep
    from vocadapt.components.errors import UserError

    monkeypatch.chdir(tmp_path)
    sweep = _sweep(tmp_path, ["fvt", "flaky"], register_best=False)
    marker = sweep.storage().local / sweep.name / "FAIL_FLAKY"
    marker.parent.mkdir(parents=True)
    marker.touch()
    first = run_sweep(sweep, objective=tiny_objective)
    assert sorted(r["status"] for r in first.rows) == ["FAILED", "FINISHED"]

    with pytest.raises(UserError, match="--resume"):
        run_sweep(sweep, objective=tiny_objective)
    marker.unlink()
    second = run_sweep(sweep, objective=tiny_objective, resume=True)
    assert second.parent_run_id == first.parent_run_id
    assert sorted(r["status"] for r in second.rows) == ["FINISHED", "FINISHED"]

    _, runs = _runs(second.tracking_uri)
    trials = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == first.parent_run_id]
    per_method = sorted((r.data.params["init.methods"], r.info.status) for r in trials)
    assert per_method == [("flaky", "FAILED"), ("flaky", "FINISHED"), ("fvt", "FINISHED")]
    parent = next(r for r in runs if r.info.run_id == first.parent_run_id)
    assert parent.info.status == "FINISHED" and parent.data.metrics["trials.finished"] == 2


def test_an_interrupted_sweep_registers_nothing_leaves_nothing_running_and_resumes(ray_cluster, tmp_path,
                                                                                   monkeypatch):
    """Ctrl-C in the middle: the unfinished trials are INTERRUPTED (not 'stopped by ASHA'), the parent run is
    KILLED, no model is registered; --resume finishes the sweep under the same parent and registers the best."""
    from vocadapt.pipelines.sweep import run_sweep

    monkeypatch.chdir(tmp_path)
    sweep = _sweep(tmp_path, ["fvt", "interrupt", "random"], scheduler={"kind": "fifo", "max_t": 3})
    marker = sweep.storage().local / sweep.name / "INTERRUPT_DRIVER"
    marker.parent.mkdir(parents=True)
    marker.write_text(str(os.getpid()))
    first = run_sweep(sweep, objective=tiny_objective)
    status = {row["params"]["init.methods"]: row["status"] for row in first.rows}
    assert first.interrupted and status["fvt"] == "FINISHED" and status["interrupt"] == "INTERRUPTED", status
    assert first.registered is None

    client, runs = _runs(first.tracking_uri)
    assert not any(run.info.status == "RUNNING" for run in runs)
    assert next(r for r in runs if r.info.run_id == first.parent_run_id).info.status == "KILLED"
    assert client.search_registered_models() == []

    marker.unlink()
    second = run_sweep(sweep, objective=tiny_objective, resume=True)
    assert second.parent_run_id == first.parent_run_id and not second.interrupted
    assert sorted(r["status"] for r in second.rows) == ["FINISHED", "FINISHED", "FINISHED"]
    assert second.registered is not None
    _, runs = _runs(second.tracking_uri)
    assert next(r for r in runs if r.info.run_id == first.parent_run_id).info.status == "FINISHED"
    assert not any(run.info.status == "RUNNING" for run in runs)
    third = run_sweep(sweep, objective=tiny_objective, resume=True)  # nothing left to run: the same best
    assert third.registered == second.registered
    assert len(client.search_model_versions("name = 'tiny-sweep-model'")) == 1
