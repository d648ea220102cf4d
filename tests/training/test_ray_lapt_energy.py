"""`vocadapt lapt` on Ray Train with two CPU workers records its energy and CO2: measured in the workers (one meter
per node), summed over nodes, returned with the trained model and logged on the run; nothing written in the working
folder. One worker-group start (under a minute on two busy cores)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.pipelines.tiny_world import build_source_model, tiny_config_overrides

pytestmark = pytest.mark.timeout(600)


def test_vocadapt_lapt_logs_the_workers_energy(tmp_path, fixture_corpora, monkeypatch):
    import ray
    from codecarbon.input import DataSource
    from mlflow.tracking import MlflowClient

    from vocadapt.cli.app import app
    from vocadapt.platform import ray_train

    corpora = {key: Path(path) for key, path in fixture_corpora.items()}
    model = build_source_model(tmp_path / "model", [corpora["en.train"]])
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    returned, collect = [], ray_train._collect

    def keep_result(*args):  # the LaptRunResult the command gets, to compare with what it logged
        returned.append(collect(*args))
        return returned[-1]

    monkeypatch.setattr(ray_train, "_collect", keep_result)
    overrides = tiny_config_overrides(model, corpora, tmp_path, **{
        "lapt.max_steps": "2", "lapt.batch_size": "2", "lapt.sequence_length": "16", "lapt.num_workers": "2",
        "lapt.eval_every": "2", "tracking.country_iso_code": "FRA", "evaluation.max_documents": "2"})
    try:
        result = CliRunner().invoke(app, ["lapt", "--model", str(model), *(a for o in overrides for a in ("--set", o))],
                                    catch_exceptions=False)
    finally:
        ray.shutdown()
    assert result.exit_code == 0, result.output

    energy = returned[-1].energy  # what the workers sent back with the model
    assert energy["stage"] == "lapt" and energy["country_iso_code"] == "FRA" and energy["kwh"] > 0
    # two workers on one node: local rank 0 measured the machine once, the other worker added nothing
    assert energy["mode"].endswith("meters summed: 1") and "cpu:" in energy["mode"]
    grid = DataSource().get_global_energy_mix_data()["FRA"]["carbon_intensity"]
    assert energy["kg_co2eq"] * 1000 / energy["kwh"] == pytest.approx(grid, rel=1e-6)

    client = MlflowClient(uri)
    (run,) = client.search_runs([client.get_experiment_by_name("tiny-e2e").experiment_id])
    metrics, tags = run.data.metrics, run.data.tags
    assert metrics["energy.lapt.kwh"] == pytest.approx(energy["kwh"]) == pytest.approx(metrics["energy.total.kwh"])
    assert metrics["emissions.lapt.kg_co2eq"] == pytest.approx(energy["kg_co2eq"])
    assert tags["vocadapt.energy_country"] == "FRA" and tags["vocadapt.energy_mode"] == energy["mode"]
    assert not list(work.iterdir()), "something was written in the working folder"


def _meter_worker_killed_once(step: int, marker: str):
    """The production train loop, except that rank 0 (the worker holding the node's meter) kills itself (SIGKILL)
    right after optimizer step ``step``, once: the marker file keeps the restarted worker alive. A closure, so Ray's
    cloudpickle sends it by value."""

    def train_loop(config: dict) -> None:
        import os
        import time

        import ray.train

        from vocadapt.components import training
        from vocadapt.platform.lapt_worker import lapt_worker

        train_lapt = training.train_lapt

        def killing_train_lapt(*args, step_hook, **kwargs):
            def hook(done: int, metrics: dict) -> None:
                step_hook(done, metrics)
                if ray.train.get_context().get_world_rank() == 0 and done == step and not Path(marker).exists():
                    Path(marker).write_text(str(os.getpid()), encoding="utf-8")
                    # Ray Train's controller collects reported checkpoints by polling the workers: a worker killed
                    # milliseconds after reporting one takes it along, and the group restarts from scratch
                    time.sleep(5)
                    os.kill(os.getpid(), 9)

            return train_lapt(*args, step_hook=hook, **kwargs)

        training.train_lapt = killing_train_lapt  # this worker process only
        try:
            lapt_worker(config)
        finally:
            training.train_lapt = train_lapt

    return train_loop


def test_a_restarted_worker_group_keeps_the_energy_counted_before_the_failure(tmp_path):
    """The meter's worker killed after step 3; Ray restarts the group from the step-2 checkpoint, which holds the
    energy measured so far: the final figure includes it."""
    import ray

    from tests.training.lapt_tiny_world import ENGLISH, ITALIAN, make_model, make_tokenizer
    from vocadapt.platform.ray_train import fit_lapt, plan_lapt

    tokenizer = make_tokenizer()
    make_model(len(tokenizer)).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    (tmp_path / "it.txt").write_text("\n".join(ITALIAN * 4), encoding="utf-8")
    (tmp_path / "en.txt").write_text("\n".join(ENGLISH * 4), encoding="utf-8")
    settings = dict(max_steps=4, batch_size=2, sequence_length=16, learning_rate=1e-2, warmup_steps=0, num_workers=2,
                    checkpoint_every=2, log_every=1, eval_every=4, max_failures=1)
    plan = plan_lapt(tmp_path / "model", tmp_path / "model", settings, target_files=[tmp_path / "it.txt"],
                     source_files=[tmp_path / "en.txt"], output_dir=tmp_path / "out", run_name="killed",
                     storage_path=tmp_path / "ray", energy_country="ITA")
    marker = tmp_path / "killed"
    try:
        result = fit_lapt(_meter_worker_killed_once(step=3, marker=str(marker)), plan)
    finally:
        ray.shutdown()
    assert marker.exists() and result.steps == 4
    energy = result.energy
    assert energy["before_restart_kwh"] > 0, "the first attempt's energy was lost"
    assert energy["kwh"] > energy["before_restart_kwh"]
