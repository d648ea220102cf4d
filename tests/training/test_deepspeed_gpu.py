"""The LAPT loop under DeepSpeed on a CUDA device (nccl, one rank, bf16): what the CPU tests in
test_deepspeed_loop.py cannot reach. Skipped without a GPU (CI has none); run on a lent GPU machine with
``python -m pytest -q -m gpu tests/training/test_deepspeed_gpu.py``. NOT YET RUN on a GPU: written after the GPU it
was meant for was withdrawn (the same paths ran there through benchmarks/lapt_throughput.py, ZeRO-2 bf16 with and
without compile); whoever next has a GPU should run it and record the result in BENCHMARKS.md.

- ZeRO-2 and ZeRO-3 in bf16 follow the fp32 plain-torch curve (within bf16's precision) and the ZeRO-3 model is
  gathered before it is saved;
- ``lapt.compile`` trains the same curve as eager under ZeRO-2 bf16;
- two-stage rebuilds the engine per stage on the GPU;
- a run resumed from a DeepSpeed checkpoint continues the uninterrupted run's curve.
"""

from __future__ import annotations

import pytest
import torch

from tests.training.lapt_tiny_world import ENGLISH, ITALIAN, make_model
from vocadapt.components.training import LaptData, LaptHooks, LaptRuntime, LaptSettings, train_lapt

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.timeout(900),
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
DATA = LaptData({"target": ITALIAN * 2, "source": ENGLISH * 2})
BF16_LOSS = 5e-2  # bf16 activations and weights against the fp32 reference, per step


@pytest.fixture(scope="module")
def process_group():
    from vocadapt.platform.lapt.deepspeed_config import init_single_process

    already = torch.distributed.is_initialized()
    init_single_process("nccl")
    yield
    if not already:
        torch.distributed.destroy_process_group()


def _settings(**overrides):
    values = dict(max_steps=6, batch_size=4, sequence_length=32, learning_rate=3e-3, warmup_steps=1, seed=0)
    values.update(overrides)
    return LaptSettings(**values)


def _model(tokenizer, **kwargs):
    return make_model(len(tokenizer), layers=4, **kwargs).to("cuda")


def _losses(result):
    return [loss for _, loss in result.series("loss")]


@pytest.fixture(scope="module")
def plain(tokenizer):
    return train_lapt(_model(tokenizer), tokenizer, DATA, _settings())


@pytest.mark.parametrize("zero_stage", [2, 3])
def test_bf16_zero_follows_the_fp32_curve_and_saves_full_weights(process_group, plain, tokenizer, tmp_path,
                                                                 zero_stage):
    from transformers import AutoModelForCausalLM

    from vocadapt.platform.lapt.deepspeed_config import deepspeed_engine_factory
    from vocadapt.platform.lapt.worker import save_model as _save_model

    settings = _settings()
    factory = deepspeed_engine_factory({"enabled": True, "zero_stage": zero_stage, "precision": "bf16"}, settings)
    result = train_lapt(_model(tokenizer), tokenizer, DATA, settings,
                        runtime=LaptRuntime(eval_documents={"target": ITALIAN[:2]}, engine_factory=factory))
    assert _losses(result) == pytest.approx(_losses(plain), abs=BF16_LOSS)
    assert _losses(result)[-1] < _losses(result)[0]
    assert result.series("mfu")  # the H100's peak is known, so MFU is reported
    _save_model(result.model, tokenizer, tmp_path / "model", rank=0)
    saved = AutoModelForCausalLM.from_pretrained(tmp_path / "model")
    assert sum(p.numel() for p in saved.parameters()) == sum(p.numel() for p in plain.model.parameters())
    for (name, p), q in zip(plain.model.named_parameters(), saved.parameters()):
        assert torch.allclose(p.float().cpu(), q.float(), atol=5e-2), name


def test_compiled_layers_train_the_eager_curve_under_zero2(process_group, tokenizer):
    from vocadapt.platform.lapt.deepspeed_config import deepspeed_engine_factory

    runs = {}
    for compiled in (False, True):
        settings = _settings(compile=compiled)
        factory = deepspeed_engine_factory({"enabled": True, "zero_stage": 2, "precision": "bf16"}, settings)
        model = _model(tokenizer)
        runs[compiled] = train_lapt(model, tokenizer, DATA, settings, runtime=LaptRuntime(engine_factory=factory))
        if compiled:
            assert all(layer._compiled_call_impl is not None for layer in model.model.layers)
    assert _losses(runs[True]) == pytest.approx(_losses(runs[False]), abs=BF16_LOSS)


def test_two_stage_on_the_gpu_trains_embeddings_first_then_everything(process_group, tokenizer):
    from vocadapt.platform.lapt.deepspeed_config import deepspeed_engine_factory

    settings = _settings(strategy="two-stage", stage_one_steps=2, stage_one_learning_rate=3e-3)
    build, held = deepspeed_engine_factory({"enabled": True, "zero_stage": 2, "precision": "bf16"}, settings), []

    def factory(module, params, spec):
        held.append(build(module, params, spec))
        return held[-1]

    model = _model(tokenizer)
    V, H = model.config.vocab_size, model.config.hidden_size
    total = sum(p.numel() for p in model.parameters())
    result = train_lapt(model, tokenizer, DATA, settings, runtime=LaptRuntime(engine_factory=factory))
    assert result.trainable_parameters == {"embeddings": V * H, "full": total}
    assert [engine.optimizer_parameter_count() for engine in held] == [V * H, total]
    assert all(engine.closed for engine in held)


def test_resumed_deepspeed_run_continues_the_uninterrupted_curve(process_group, tokenizer, tmp_path):
    from vocadapt.platform.lapt.deepspeed_config import deepspeed_engine_factory

    settings = _settings(checkpoint_every=3)
    deepspeed = {"enabled": True, "zero_stage": 2, "precision": "bf16"}
    written = {}

    def hook(step, write, metrics):
        directory = tmp_path / f"step-{step}"
        write(directory)
        written[step] = directory

    full = train_lapt(_model(tokenizer), tokenizer, DATA, settings,
                      hooks=LaptHooks(on_checkpoint=hook),
                      runtime=LaptRuntime(engine_factory=deepspeed_engine_factory(deepspeed, settings)))
    assert 3 in written
    # other initial weights: everything after step 3 must come from the checkpoint
    resumed = train_lapt(_model(tokenizer, seed=1), tokenizer, DATA, settings,
                         runtime=LaptRuntime(engine_factory=deepspeed_engine_factory(deepspeed, settings),
                                             resume_state=written[3]))
    assert [step for step, _ in resumed.series("loss")] == [1, 2, 3, 4, 5, 6]  # no step counted twice
    assert _losses(resumed) == pytest.approx(_losses(full), abs=1e-2)  # GPU kernels are not bitwise reproducible
