"""LAPT on Ray Train with two CPU workers: the results, MLflow, a killed worker under DeepSpeed ZeRO-2, and the
energy and CO2 the workers measure (kept across the restart, logged by `vocadapt lapt`). The Italian stream is a
streaming Hugging Face dataset, so the killed run also resumes it from the dataset's saved state.

One local Ray cluster serves the module. Starting a worker group costs 20-40 s on two busy cores (and the first
DeepSpeed run on a machine compiles a communication op, ~2 min, cached after), so there are three runs: plain DDP,
DeepSpeed ZeRO-2 with the worker holding the node's energy meter killed mid-run, and `vocadapt lapt` from the
command line; the killed run rerun under its name is found finished and returned without a worker group.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.training.ray_lapt_world import (hooked_train_loop, kill_once, lapt_inputs, lapt_settings,
                                            streaming_italian, write_lapt_world)
from tests.pipelines.tiny_world import build_source_model, tiny_config_overrides

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    from vocadapt.platform.lapt.ray_train import init_ray

    init_ray(num_cpus=2)
    init_ray(num_cpus=2)  # a second call in the same process is harmless
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A tiny model folder (with its tokenizer) and Italian / English text files, the Italian also as JSON Lines."""
    return write_lapt_world(tmp_path_factory.mktemp("lapt-world"), streaming=True)


def _settings(world, **kwargs):
    """The target stream is a streaming Hugging Face dataset (local JSON Lines); the source stream a text file."""
    return lapt_settings(datasets={"target": streaming_italian(world)}, **kwargs)


def _run(world, name, settings, **kwargs):
    from vocadapt.platform.lapt.ray_train import run_lapt_on_ray

    return run_lapt_on_ray(world / "model", world / "model", settings, **lapt_inputs(world, name, **kwargs))


@pytest.fixture(scope="module")
def uninterrupted(ray_cluster, world):
    return _run(world, "straight", _settings(world))


def test_two_workers_train_mix_and_save_a_model(uninterrupted):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    result = uninterrupted
    assert [step for step, _ in result.series("loss")] == [1, 2, 3, 4, 5, 6]
    assert result.tokens == 6 * 2 * 16 * 2  # steps x batch x length x workers, no padding
    # two sequences per worker: the mix holds on every global batch of four, not just on average
    assert all(abs(share - 0.75) <= 0.02 for _, share in result.series("token_share_target"))
    assert set(result.bits_per_byte) == {"target", "source"} and result["model_dir"] == result.model_dir
    assert (result.model_dir / "model.safetensors").is_file()
    assert not list(result.model_dir.glob("*.bin"))
    AutoModelForCausalLM.from_pretrained(result.model_dir)
    AutoTokenizer.from_pretrained(result.model_dir)


def test_killed_deepspeed_worker_resumes_with_the_same_curve_and_energy(ray_cluster, world, uninterrupted, tmp_path,
                                                                         monkeypatch):
    """ZeRO-2 on gloo, worker 0 (the one holding the node's energy meter) killed (SIGKILL) after step 3; Ray
    restarts the group from the step-2 checkpoint. The curve matches the uninterrupted DDP run of the same seed:
    same data (the streaming dataset resumed from its saved state), same AdamW, same schedule; the step-2
    checkpoint holds the energy measured so far, and the final figure includes it."""
    from mlflow.tracking import MlflowClient

    from vocadapt.platform.lapt import ray_train
    from vocadapt.platform.lapt.ray_train import fit_lapt, plan_lapt

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("lapt", artifact_location=str(tmp_path / "artifacts"))
    run_id = client.create_run(experiment).info.run_id
    marker = tmp_path / "killed"
    zero2 = _settings(world, deepspeed={"enabled": True, "zero_stage": 2})
    plan = plan_lapt(world / "model", world / "model", zero2,
                     **lapt_inputs(world, "killed", energy_country="ITA", tracking_uri=uri, mlflow_run_id=run_id))
    # Ray Train's controller collects reported checkpoints by polling the workers: rank 0 killed milliseconds after
    # reporting one takes it along, and the group restarts from scratch; it waits 5 s before dying
    resumed = fit_lapt(hooked_train_loop(kill_once(rank=0, step=3, marker=str(marker), pause=5)), plan)
    assert marker.exists()  # the worker really died at step 3, after the step-2 checkpoint
    assert [step for step, _ in resumed.series("loss")] == [1, 2, 3, 4, 5, 6]
    for (_, a), (_, b) in zip(uninterrupted.series("loss"), resumed.series("loss")):
        assert a == pytest.approx(b, abs=1e-4)
    logged = [m.step for m in client.get_metric_history(run_id, "lapt_loss")]
    assert sorted(logged) == [1, 2, 3, 4, 5, 6]  # no step counted twice in MLflow
    assert client.get_metric_history(run_id, "lapt_bits_per_byte_target")
    energy = resumed.energy
    assert energy["before_restart_kwh"] > 0, "the first attempt's energy was lost"
    assert energy["kwh"] > energy["before_restart_kwh"]
    # same name: the finished run is found (Ray's checkpoint record names its final checkpoint), not retrained, and
    # no worker group is started for it
    monkeypatch.setattr(ray_train, "_fit", lambda *args: pytest.fail("a worker group was started for a finished run"))
    again = _run(world, "killed", zero2)
    assert again.steps == 6 and again.series("loss") == resumed.series("loss") and again.energy == resumed.energy


def test_vocadapt_lapt_logs_the_workers_energy(ray_cluster, tmp_path, fixture_corpora, monkeypatch):
    """`vocadapt lapt` (on this module's cluster) records its energy and CO2: measured in the workers (one meter
    per node), summed over nodes, returned with the trained model and logged on the run; nothing written in the
    working folder."""
    from codecarbon.input import DataSource
    from mlflow.tracking import MlflowClient

    from vocadapt.cli.app import app
    from vocadapt.platform.lapt import ray_train

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
        "lapt.runner": "ray",
        "lapt.eval_every": "2", "tracking.country_iso_code": "FRA", "evaluation.max_documents": "2"})
    result = CliRunner().invoke(app, ["lapt", "--model", str(model), *(a for o in overrides for a in ("--set", o))],
                                catch_exceptions=False)
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


def test_workers_the_started_cluster_cannot_place_are_refused_before_the_run_exists(ray_cluster, world, monkeypatch):
    """This module's cluster (2 CPUs, started in this process) cannot grow: three one-CPU workers are refused before
    the run's record or folder is written, naming what is missing. The same cluster named by RAY_ADDRESS (which an
    autoscaler could grow) is only warned about."""
    from vocadapt.components.errors import UserError
    from vocadapt.platform.lapt.ray_train import fit_lapt, plan_lapt
    from vocadapt.platform.lapt.resources import check_lapt_resources
    from vocadapt.platform.lapt.worker import lapt_worker

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    three = _settings(world, num_workers=3)
    plan = plan_lapt(world / "model", world / "model", three, **lapt_inputs(world, "unplaceable"))
    with pytest.raises(UserError, match=r"CPU: 3 needed \(1 a worker x 3 workers\), 2 in the cluster"):
        fit_lapt(lapt_worker, plan)
    assert not (plan.storage / plan.run_name).exists() and not plan.output_dir.exists()
    warnings = []
    monkeypatch.setenv("RAY_ADDRESS", "auto")
    check_lapt_resources(plan.section, warn=warnings.append)
    assert len(warnings) == 1 and "CPU: 3 needed" in warnings[0] and "autoscaler" in warnings[0]
