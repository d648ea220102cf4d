"""The edges of LAPT that need no Ray cluster: the DeepSpeed config, the MLflow logger, the config section."""

import pytest

from vocadapt.platform.config import load_config
from vocadapt.platform.config.lapt_sections import ConfigError
from vocadapt.components.training.engine import EngineSpec
from vocadapt.platform.lapt.deepspeed_config import deepspeed_config


def _config(**deepspeed):
    spec = EngineSpec(learning_rate=1e-4, warmup_steps=0, total_steps=10, schedule="constant", min_lr_ratio=0.1,
                      weight_decay=0.1, max_grad_norm=1.0, grad_accumulation_steps=2)
    return deepspeed_config({"enabled": True, **deepspeed}, spec, micro_batch_size=4, world_size=3, on_gpu=False)


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_deepspeed_config_follows_the_settings(stage):
    cpu = _config(zero_stage=stage)
    assert cpu["zero_optimization"]["stage"] == stage
    assert cpu["train_batch_size"] == 4 * 2 * 3
    assert cpu["optimizer"]["params"]["torch_adam"] is True  # no fused-Adam compilation
    assert cpu["bf16"]["enabled"] is False  # auto: fp32 on CPU
    spec = EngineSpec(learning_rate=1e-4, warmup_steps=0, total_steps=10, schedule="constant", min_lr_ratio=0.1,
                      weight_decay=0.0, max_grad_norm=None, grad_accumulation_steps=1)
    gpu = deepspeed_config({"enabled": True, "zero_stage": stage, "offload_optimizer": True}, spec,
                           micro_batch_size=4, world_size=1, on_gpu=True)
    assert gpu["bf16"]["enabled"] is True and gpu["zero_optimization"]["offload_optimizer"]["device"] == "cpu"
    assert gpu["gradient_clipping"] == 0.0


def test_deepspeed_offload_without_zero_is_refused():
    with pytest.raises(ValueError, match="needs ZeRO stage"):
        _config(zero_stage=0, offload_optimizer=True)


def test_mlflow_logger_continues_a_run_without_repeating_steps(tmp_path):
    from mlflow.tracking import MlflowClient

    from vocadapt.platform.lapt.worker import MlflowRunLogger

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    run_id = client.create_run(client.create_experiment("x", artifact_location=str(tmp_path / "a"))).info.run_id
    first = MlflowRunLogger(uri, run_id)
    for step in (1, 2, 3):
        first.log_metrics({"loss": 5.0 - step}, step=step)
    resumed = MlflowRunLogger(uri, run_id)  # a restarted worker: steps 2 and 3 come again, then 4
    for step in (2, 3, 4):
        resumed.log_metrics({"loss": 5.0 - step, "bits_per_byte_target": 2.0}, step=step)
    assert [m.step for m in client.get_metric_history(run_id, "lapt_loss")] == [1, 2, 3, 4]


def test_lapt_section_validates_up_front():
    config = load_config(None, ["target.language=it", "lapt.strategy=two-stage", "lapt.deepspeed.enabled=true", "lapt.deepspeed.zero_stage=2"])
    assert config.lapt.deepspeed.zero_stage == 2
    with pytest.raises(ConfigError, match="ZeRO-3"):
        load_config(None, ["target.language=it", "lapt.strategy=two-stage", "lapt.deepspeed.enabled=true", "lapt.deepspeed.zero_stage=3"])
    with pytest.raises(ConfigError, match="lapt.strategy"):
        load_config(None, ["target.language=it", "lapt.strategy=everything"])
    with pytest.raises(ConfigError, match="unknown streams"):
        load_config(None, ["target.language=it", "lapt.train_files={klingon: [a.txt]}"])


def test_missing_lapt_files_are_named_before_ray_starts(tmp_path):
    from vocadapt.platform.lapt.ray_train import LaptInputs, LaptPlacement, run_lapt_on_ray

    with pytest.raises(ConfigError, match="does not exist"):
        run_lapt_on_ray(tmp_path, tmp_path, {}, LaptInputs([tmp_path / "nope.txt"], [tmp_path / "x"]),
                        placement=LaptPlacement(tmp_path, "x"))
    with pytest.raises(ConfigError, match="no source training files"):
        run_lapt_on_ray(tmp_path, tmp_path, {}, LaptInputs([tmp_path / "nope.txt"]),
                        placement=LaptPlacement(tmp_path, "x"))


def test_a_run_name_is_not_resumed_with_other_inputs(tmp_path):
    from vocadapt.platform.lapt.ray_train import _claim_run_name

    config = {"model_dir": "/m", "tokenizer_dir": "/m", "train_files": {"target": ["it.txt"]},
              "settings": {"max_steps": 6, "eval_every": 3, "seed": 0}}
    _claim_run_name(tmp_path / "run", config)
    cadence = {"max_steps": 6, "eval_every": 2, "seed": 0}  # cadence may change
    _claim_run_name(tmp_path / "run", {**config, "settings": cadence})
    with pytest.raises(ConfigError, match=r"settings.max_steps.*choose a new run name"):
        _claim_run_name(tmp_path / "run", {**config, "settings": {"max_steps": 8, "eval_every": 3, "seed": 0}})
    with pytest.raises(ConfigError, match="settings.seed"):
        _claim_run_name(tmp_path / "run", {**config, "settings": {"max_steps": 6, "eval_every": 3, "seed": 1}})


def test_a_stream_can_come_from_a_hugging_face_dataset(tmp_path):
    from vocadapt.components.training import DatasetSource
    from vocadapt.platform.lapt.ray_train import LaptInputs, LaptPlacement, run_lapt_on_ray

    culturax = "{dataset: uonlp/CulturaX, config: it, split: train, text_field: text, streaming: true}"
    config = load_config(None, ["target.language=it", f"lapt.datasets={{target: {culturax}}}"])
    source = config.lapt.datasets["target"]  # the worker receives the section as it is
    assert source == DatasetSource("uonlp/CulturaX", "it", "train", "text", streaming=True)
    with pytest.raises(ConfigError, match="both train_files and a dataset"):
        load_config(None, ["target.language=it", f"lapt.datasets={{target: {culturax}}}",
                           "lapt.train_files={target: [it.txt]}"])
    with pytest.raises(ConfigError, match="lapt.datasets"):
        load_config(None, ["target.language=it", "lapt.datasets={target: {dataset: x, shuffle: true}}"])
    missing = {"datasets": {"target": {"dataset": "json", "data_files": [str(tmp_path / "it.jsonl")]}}}
    (tmp_path / "en.txt").write_text("hello\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="data_files.*does not exist"):
        run_lapt_on_ray(tmp_path, tmp_path, missing, LaptInputs([], [tmp_path / "en.txt"]),
                        placement=LaptPlacement(tmp_path, "x"))
