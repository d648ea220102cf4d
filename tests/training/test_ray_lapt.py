"""LAPT on Ray Train with two CPU workers: the results, MLflow, a killed worker under DeepSpeed ZeRO-2. The Italian
stream is a streaming Hugging Face dataset, so the killed run also resumes it from the dataset's saved state.

One local Ray cluster serves the module. Starting a worker group costs 20-40 s on two busy cores (and the first
DeepSpeed run on a machine compiles a communication op, ~2 min, cached after), so there are three runs: plain DDP,
DeepSpeed ZeRO-2 with a worker killed mid-run, and a rerun under the same name.
"""

from __future__ import annotations

import json

import pytest

from tests.training.lapt_tiny_world import ENGLISH, ITALIAN, make_model, make_tokenizer

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    from vocadapt.platform.ray_train import init_ray

    init_ray(num_cpus=2)
    init_ray(num_cpus=2)  # a second call in the same process is harmless
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A tiny model folder (with its tokenizer) and Italian / English text files."""
    root = tmp_path_factory.mktemp("lapt-world")
    tokenizer = make_tokenizer()
    make_model(len(tokenizer)).save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    (root / "it.txt").write_text("\n".join(ITALIAN * 4), encoding="utf-8")
    for part in range(2):  # the same Italian as a streaming dataset of two JSON Lines files
        (root / f"it-{part}.jsonl").write_text(
            "".join(json.dumps({"text": text}) + "\n" for text in (ITALIAN * 4)[part * 16 : part * 16 + 16]),
            encoding="utf-8")
    (root / "en.txt").write_text("\n".join(ENGLISH * 4), encoding="utf-8")
    return root


def _settings(world, **kwargs):
    """The target stream is a streaming Hugging Face dataset (local JSON Lines); the source stream a text file."""
    italian = {"dataset": "json", "data_files": [str(world / f"it-{part}.jsonl") for part in range(2)],
               "streaming": True}
    options = dict(max_steps=6, batch_size=2, sequence_length=16, learning_rate=1e-2, warmup_steps=1,
                   num_workers=2, checkpoint_every=2, log_every=1, eval_every=3, datasets={"target": italian})
    options.update(kwargs)
    return options


def _inputs(world, name, **kwargs):
    return dict(target_files=[world / "it.txt"], source_files=[world / "en.txt"],
                eval_documents={"target": ITALIAN[:2], "source": ENGLISH[:2]}, output_dir=world / name,
                run_name=name, storage_path=world / "ray", **kwargs)


def _run(world, name, settings, **kwargs):
    from vocadapt.platform.ray_train import run_lapt_on_ray

    return run_lapt_on_ray(world / "model", world / "model", settings, **_inputs(world, name, **kwargs))


def _worker_killed_once(rank: int, step: int, marker: str):
    """The production train loop, except that worker ``rank`` kills itself (SIGKILL) right after optimizer step
    ``step``, once: the marker file it writes first keeps the restarted worker alive. A closure, so Ray's
    cloudpickle sends it by value instead of by a module path the workers would have to import."""

    def train_loop(config: dict) -> None:
        import os
        from pathlib import Path

        import ray.train

        from vocadapt.components import training
        from vocadapt.platform.lapt_worker import lapt_worker

        train_lapt = training.train_lapt

        def killing_train_lapt(*args, step_hook, **kwargs):
            def hook(done: int, metrics: dict) -> None:
                step_hook(done, metrics)
                here = ray.train.get_context().get_world_rank()
                if here == rank and done == step and not Path(marker).exists():
                    Path(marker).write_text(str(os.getpid()), encoding="utf-8")
                    os.kill(os.getpid(), 9)

            return train_lapt(*args, step_hook=hook, **kwargs)

        training.train_lapt = killing_train_lapt  # this worker process only
        try:
            lapt_worker(config)
        finally:
            training.train_lapt = train_lapt

    return train_loop


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


def test_killed_deepspeed_worker_resumes_with_the_same_curve(ray_cluster, world, uninterrupted, tmp_path):
    """ZeRO-2 on gloo, worker 1 killed (SIGKILL) after step 3; Ray restarts the group from the step-2 checkpoint.
    The curve matches the uninterrupted DDP run of the same seed: same data (the streaming dataset resumed from
    its saved state), same AdamW, same schedule."""
    from mlflow.tracking import MlflowClient

    from vocadapt.platform.ray_train import fit_lapt, plan_lapt

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("lapt", artifact_location=str(tmp_path / "artifacts"))
    run_id = client.create_run(experiment).info.run_id
    marker = tmp_path / "killed"
    zero2 = _settings(world, deepspeed={"enabled": True, "zero_stage": 2})
    plan = plan_lapt(world / "model", world / "model", zero2,
                     **_inputs(world, "killed", tracking_uri=uri, mlflow_run_id=run_id))
    resumed = fit_lapt(_worker_killed_once(rank=1, step=3, marker=str(marker)), plan)
    assert marker.exists()  # the worker really died at step 3, after the step-2 checkpoint
    assert [step for step, _ in resumed.series("loss")] == [1, 2, 3, 4, 5, 6]
    for (_, a), (_, b) in zip(uninterrupted.series("loss"), resumed.series("loss")):
        assert a == pytest.approx(b, abs=1e-4)
    logged = [m.step for m in client.get_metric_history(run_id, "lapt_loss")]
    assert sorted(logged) == [1, 2, 3, 4, 5, 6]  # no step counted twice in MLflow
    assert client.get_metric_history(run_id, "lapt_bits_per_byte_target")
    again = _run(world, "killed", zero2)  # same name: the finished run is found, not retrained
    assert again.steps == 6 and again.series("loss") == resumed.series("loss")
