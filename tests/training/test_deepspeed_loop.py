"""The LAPT loop under DeepSpeed in one process (gloo, one rank): ZeRO-3 and ZeRO-2 with optimizer offload follow
the plain-torch curve, and the ZeRO-3 model is gathered before it is saved. The first DeepSpeed start on a machine
compiles a communication op (~35 s, cached)."""

from __future__ import annotations

import pytest
import torch

from tests.training.lapt_tiny_world import ENGLISH, ITALIAN, make_model
from vocadapt.components.training import LaptData, LaptSettings, train_lapt

pytestmark = pytest.mark.timeout(600)
DATA = LaptData({"target": ITALIAN, "source": ENGLISH})


@pytest.fixture(scope="module")
def process_group():
    from vocadapt.platform.deepspeed_config import init_single_process

    already = torch.distributed.is_initialized()
    init_single_process("gloo")
    yield
    if not already:
        torch.distributed.destroy_process_group()


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

    from vocadapt.platform.deepspeed_config import deepspeed_engine_factory
    from vocadapt.platform.ray_train import _save_model

    settings = _settings()
    factory = deepspeed_engine_factory({"enabled": True, **deepspeed}, settings)
    result = train_lapt(make_model(len(tokenizer)), tokenizer, DATA, settings, engine_factory=factory,
                        eval_documents={"target": ITALIAN[:2]})
    for (_, a), (_, b) in zip(plain.series("loss"), result.series("loss")):
        assert a == pytest.approx(b, abs=1e-4)
    assert result.series("bits_per_byte_target")
    _save_model(result.model, tokenizer, tmp_path / "model", rank=0)
    saved = AutoModelForCausalLM.from_pretrained(tmp_path / "model")
    for (name, p), q in zip(plain.model.named_parameters(), saved.parameters()):
        assert torch.allclose(p, q, atol=1e-3), name
