"""``lapt.runner: in_process``: the LAPT loop in the pipeline's own process, without Ray. The same plan, loop,
MLflow logging and saved model as a Ray run; what only Ray gives is refused with the fix."""

from __future__ import annotations

import hashlib

import pytest

from tests.training.lapt_tiny_world import ENGLISH, ITALIAN
from tests.training.ray_lapt_world import lapt_inputs, lapt_settings, write_lapt_world
from vocadapt.platform.config import load_config
from vocadapt.platform.config.lapt_sections import ConfigError

IN_PROCESS = lapt_settings(runner="in_process", num_workers=1)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return write_lapt_world(tmp_path_factory.mktemp("in-process-world"))


def _plan(world, name, settings=IN_PROCESS, **tracking):
    from vocadapt.platform.lapt.ray_train import plan_lapt

    return plan_lapt(world / "model", world / "model", settings, **lapt_inputs(world, name, storage_path=None,
                                                                                   **tracking))


def _model_digest(folder) -> str:
    return hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()


@pytest.mark.parametrize("override, named", [
    ("lapt.num_workers=2", "lapt.num_workers is 2"),
    ("lapt.deepspeed.enabled=true", "lapt.deepspeed.enabled is true"),
    ("lapt.storage_path=s3://bucket/runs", "lapt.storage_path is set"),
])
def test_what_only_ray_gives_is_refused_with_the_fix(override, named):
    with pytest.raises(ConfigError, match=rf"{named}.*use lapt.runner 'ray'"):
        load_config(None, ["target.language=it", "lapt.runner=in_process", override])
    assert load_config(None, ["target.language=it", override]).lapt.runner == "ray"  # the default takes them all


def test_unknown_runner_is_refused():
    with pytest.raises(ConfigError, match="lapt.runner"):
        load_config(None, ["target.language=it", "lapt.runner=slurm"])


def test_the_run_logs_to_mlflow_and_saves_a_safetensors_model(world, tmp_path):
    from mlflow.tracking import MlflowClient

    from vocadapt.platform.lapt.in_process import fit_lapt_in_process

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    run_id = client.create_run(client.create_experiment("x", artifact_location=str(tmp_path / "a"))).info.run_id
    result = fit_lapt_in_process(_plan(world, "logged", tracking_uri=uri, mlflow_run_id=run_id))

    assert result.steps == 6 and result.tokens > 0
    assert set(result.bits_per_byte) == {"target", "source"} and all(v > 0 for v in result.bits_per_byte.values())
    assert sorted(path.name for path in result.model_dir.iterdir() if path.suffix in (".safetensors", ".bin")) == [
        "model.safetensors"]
    assert [m.step for m in client.get_metric_history(run_id, "lapt_loss")] == [1, 2, 3, 4, 5, 6]
    assert result.series("loss")[-1][1] == client.get_metric_history(run_id, "lapt_loss")[-1].value
    assert result.checkpoint_path == "" and result.energy == {}


def test_the_run_is_the_loop_a_ray_worker_runs_and_is_deterministic(world):
    """The loss curve is ``train_lapt``'s on the same model, text and settings (what each Ray worker calls), and a
    second run writes the same model bytes."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vocadapt.components import training
    from vocadapt.platform.lapt.in_process import fit_lapt_in_process
    from vocadapt.platform.lapt.ray_train import lapt_section

    first = fit_lapt_in_process(_plan(world, "first"))
    second = fit_lapt_in_process(_plan(world, "second"))
    assert _model_digest(first.model_dir) == _model_digest(second.model_dir)

    tokenizer = AutoTokenizer.from_pretrained(world / "model")
    model = AutoModelForCausalLM.from_pretrained(world / "model", torch_dtype=torch.float32)
    files = {"target": [str(world / "it.txt")], "source": [str(world / "en.txt")]}
    direct = training.train_lapt(model, tokenizer, training.LaptData.from_sources(files), lapt_section(IN_PROCESS),
                                 runtime=training.LaptRuntime(eval_documents={"target": ITALIAN[:2],
                                                                              "source": ENGLISH[:2]}))
    assert first.series("loss") == [(step, m["loss"]) for step, m in direct.history if "loss" in m]
