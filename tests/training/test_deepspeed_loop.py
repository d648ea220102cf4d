"""The LAPT loop under DeepSpeed in one process (gloo, one rank): ZeRO-3 and ZeRO-2 with optimizer offload follow
the plain-torch curve, and the ZeRO-3 model is gathered before it is saved; under ZeRO-2 two-stage rebuilds the
engine per stage and every strategy's optimizer holds exactly its trainable parameters. The first DeepSpeed start
on a machine compiles a communication op (~35 s, cached)."""

from __future__ import annotations

import pytest
import torch

from tests.training.lapt_tiny_world import ENGLISH, ITALIAN, make_model
from vocadapt.components.training import LaptData, LaptRuntime, LaptSettings, train_lapt

pytestmark = pytest.mark.timeout(600)
DATA = LaptData({"target": ITALIAN, "source": ENGLISH})


@pytest.fixture()
def process_group(gloo_process_group):
    return gloo_process_group


def _settings():
    return LaptSettings(max_steps=3, batch_size=2, sequence_length=16, learning_rate=1e-2, warmup_steps=1)


@pytest.fixture(scope="module")
def plain(tokenizer):
    return train_lapt(make_model(len(tokenizer)), tokenizer, DATA, _settings())


@pytest.mark.parametrize("deepspeed", [{"zero_stage": 3}, {"zero_stage": 2, "offload_optimizer": True}],
                         ids=["zero3", "zero2-offload"])
def test_deepspeed_follows_the_plain_curve_and_saves_full_weights(process_group, plain, tokenizer, tmp_path,
                                                                  deepspeed):
    from transformers import AutoModelForCausalLM

    from vocadapt.platform.lapt.deepspeed_config import deepspeed_engine_factory
    from vocadapt.platform.lapt.worker import save_model as _save_model

    settings = _settings()
    factory = deepspeed_engine_factory({"enabled": True, **deepspeed}, settings)
    result = train_lapt(make_model(len(tokenizer)), tokenizer, DATA, settings,
                        runtime=LaptRuntime(eval_documents={"target": ITALIAN[:2]}, engine_factory=factory))
    for (_, a), (_, b) in zip(plain.series("loss"), result.series("loss")):
        assert a == pytest.approx(b, abs=1e-4)
    assert result.series("bits_per_byte_target")
    _save_model(result.model, tokenizer, tmp_path / "model", rank=0)
    saved = AutoModelForCausalLM.from_pretrained(tmp_path / "model")
    for (name, p), q in zip(plain.model.named_parameters(), saved.parameters()):
        assert torch.allclose(p, q, atol=1e-3), name


def _two_stage():
    return LaptSettings(strategy="two-stage", max_steps=4, stage_one_steps=2, batch_size=2, sequence_length=16,
                        learning_rate=1e-2, stage_one_learning_rate=1e-2, warmup_steps=1, seed=0)


@pytest.mark.parametrize("second_stage", ["full", "lora"])
def test_two_stage_rebuilds_the_deepspeed_engine_with_the_new_trainable_set(process_group, tokenizer, second_stage):
    """ZeRO-2: stage one trains embeddings and head only, stage two everything (or LoRA plus embeddings); each stage
    gets its own DeepSpeed engine, whose optimizer holds exactly that stage's parameters; the stage-one engine is
    closed (its gradient hooks removed, so it no longer processes the embeddings' gradients in stage two), and the
    curve follows the plain-torch run."""
    from vocadapt.platform.lapt.deepspeed_config import deepspeed_engine_factory

    settings = LaptSettings(**{**_two_stage().model_dump(), "second_stage": second_stage, "lora_rank": 4})
    build = deepspeed_engine_factory({"enabled": True, "zero_stage": 2}, settings)
    held, stale_calls = [], [0]  # engines per stage; gradients a closed engine still processed

    def factory(module, params, spec):
        engine = build(module, params, spec)
        held.append(engine)
        process = engine.engine.optimizer.process_gradients

        def counted(*args, **kwargs):
            stale_calls[0] += engine.closed
            return process(*args, **kwargs)

        engine.engine.optimizer.process_gradients = counted
        return engine

    model = make_model(len(tokenizer))
    V, H = model.config.vocab_size, model.config.hidden_size
    total = sum(p.numel() for p in model.parameters())
    plain = train_lapt(make_model(len(tokenizer)), tokenizer, DATA, settings)
    result = train_lapt(model, tokenizer, DATA, settings, runtime=LaptRuntime(engine_factory=factory))
    second = total if second_stage == "full" else plain.trainable_parameters["lora"]
    assert result.trainable_parameters == plain.trainable_parameters == {"embeddings": V * H, second_stage: second}
    assert [engine.optimizer_parameter_count() for engine in held] == [V * H, second]
    assert all(engine.closed for engine in held) and stale_calls == [0]
    for (_, a), (_, b) in zip(plain.series("loss"), result.series("loss")):
        assert a == pytest.approx(b, abs=1e-4)
    for (name, p), q in zip(plain.model.named_parameters(), result.model.parameters()):
        assert torch.allclose(p, q, atol=1e-4), name


@pytest.mark.parametrize("strategy", ["lora", "2x2-ls"])
def test_every_strategy_trains_its_parameters_under_deepspeed(process_group, tokenizer, strategy):
    """ZeRO-2 with the MTP head: the DeepSpeed optimizer holds exactly the strategy's trainable parameters, the same
    count as the plain-torch run's, and follows its curve (full and two-stage are covered above)."""
    from vocadapt.platform.lapt.deepspeed_config import deepspeed_engine_factory

    settings = LaptSettings(**{**_settings().model_dump(), "strategy": strategy, "objective": "mtp", "lora_rank": 4})
    build, held = deepspeed_engine_factory({"enabled": True, "zero_stage": 2}, settings), []

    def factory(module, params, spec):
        held.append(build(module, params, spec))
        return held[-1]

    def model():
        return make_model(len(tokenizer), layers=6, tie=strategy != "lora")

    plain = train_lapt(model(), tokenizer, DATA, settings)
    result = train_lapt(model(), tokenizer, DATA, settings, runtime=LaptRuntime(engine_factory=factory))
    assert result.trainable_parameters == plain.trainable_parameters
    assert [engine.optimizer_parameter_count() for engine in held] == [plain.trainable_parameters[strategy]]
    for (_, a), (_, b) in zip(plain.series("loss"), result.series("loss")):
        assert a == pytest.approx(b, abs=1e-4)
