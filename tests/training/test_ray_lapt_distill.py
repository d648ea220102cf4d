"""`vocadapt lapt` with a distillation objective on Ray Train: the teacher is the config's source model with its own
tokenizer, the student a model with another tokenizer; every term reaches MLflow. `vocadapt adapt` distils each
method from the source model through the same LAPT request, in its own process (``lapt.runner: in_process``: the
teacher's way to Ray's workers is the first test's). A missing teacher is refused before any run. One worker-group
start."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.pipelines.tiny_world import build_source_model, tiny_config_overrides

pytestmark = pytest.mark.timeout(600)


def _setup(tmp_path, fixture_corpora, monkeypatch, **extra):
    corpora = {key: Path(path) for key, path in fixture_corpora.items()}
    teacher = build_source_model(tmp_path / "teacher", [corpora["en.train"]], vocab_size=300)
    student = build_source_model(tmp_path / "student", [corpora["it.train"]], vocab_size=500)
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    overrides = tiny_config_overrides(teacher, corpora, tmp_path, **{
        "lapt.max_steps": "3", "lapt.batch_size": "2", "lapt.sequence_length": "24", "tracking.energy": "false",
        "evaluation.max_documents": "2", "lapt.runner": "ray", **extra})
    return student, uri, [a for o in overrides for a in ("--set", o)]


def test_vocadapt_lapt_distils_from_the_source_model(tmp_path, fixture_corpora, monkeypatch):
    import ray
    from mlflow.tracking import MlflowClient

    from vocadapt.cli.app import app

    student, uri, options = _setup(tmp_path, fixture_corpora, monkeypatch, **{"lapt.objective": "clm+distill",
                                                                             "lapt.distill_weight": "0.5"})
    try:
        result = CliRunner().invoke(app, ["lapt", "--model", str(student), *options], catch_exceptions=False)
        # the cluster this process started (one machine, never drained) runs no preemption watcher
        actor_classes = {actor["ActorClassName"] for actor in ray._private.state.actors().values()}
    finally:
        ray.shutdown()
    assert result.exit_code == 0, result.output
    assert any("Controller" in name for name in actor_classes), actor_classes
    assert not any("Preemption" in name for name in actor_classes), actor_classes
    client = MlflowClient(uri)
    (run,) = client.search_runs([client.get_experiment_by_name("tiny-e2e").experiment_id])
    for name in ("loss", "objective_loss", "distill_loss", "distill_groups"):
        history = client.get_metric_history(run.info.run_id, f"lapt_{name}")
        assert [m.step for m in history] == [1, 2, 3], name
    distill = [m.value for m in client.get_metric_history(run.info.run_id, "lapt_distill_loss")]
    assert all(value > 0 for value in distill)
    assert run.data.params["lapt.objective"] == "clm+distill"


def test_a_missing_teacher_is_refused_before_any_run(tmp_path, fixture_corpora, monkeypatch):
    from mlflow.tracking import MlflowClient

    from vocadapt.cli.app import app

    student, uri, options = _setup(tmp_path, fixture_corpora, monkeypatch, **{
        "lapt.objective": "distill", "lapt.teacher": str(tmp_path / "no-such-teacher")})
    result = CliRunner().invoke(app, ["lapt", "--model", str(student), *options])
    assert result.exit_code == 2, result.output
    assert "lapt.teacher" in result.output and "no-such-teacher" in result.output
    experiment = MlflowClient(uri).get_experiment_by_name("tiny-e2e")
    assert experiment is None or not MlflowClient(uri).search_runs([experiment.experiment_id])


def test_vocadapt_adapt_distils_each_method_from_the_source_model(tmp_path, fixture_corpora, monkeypatch):
    import ray
    from mlflow.tracking import MlflowClient

    from vocadapt.cli.app import app

    _, uri, options = _setup(tmp_path, fixture_corpora, monkeypatch, **{
        "lapt.objective": "clm+distill", "init.methods": "[fvt]", "tracking.register_best": "false",
        "lapt.runner": "in_process"})
    result = CliRunner().invoke(app, ["adapt", *options], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert not ray.is_initialized()  # no cluster was started for it
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("tiny-e2e").experiment_id])
    (child,) = [run for run in runs if run.info.run_name.endswith("/fvt")]
    history = client.get_metric_history(child.info.run_id, "lapt_distill_loss")
    assert [m.step for m in history] == [1, 2, 3] and all(m.value > 0 for m in history)
    assert child.data.metrics["bpb_target_after_lapt"] > 0


def test_adapt_refuses_a_missing_teacher_before_any_run_or_folder(tmp_path, fixture_corpora, monkeypatch):
    from mlflow.tracking import MlflowClient

    from vocadapt.cli.app import app

    _, uri, options = _setup(tmp_path, fixture_corpora, monkeypatch, **{
        "lapt.objective": "distill", "lapt.teacher": str(tmp_path / "no-such-teacher"), "init.methods": "[fvt]"})
    result = CliRunner().invoke(app, ["adapt", *options])
    assert result.exit_code == 2, result.output
    assert "lapt.teacher" in result.output and "no-such-teacher" in result.output
    assert not (tmp_path / "runs").exists()
    experiment = MlflowClient(uri).get_experiment_by_name("tiny-e2e")
    assert experiment is None or not MlflowClient(uri).search_runs([experiment.experiment_id])
