"""LAPT with a teacher: the source model (its own tokenizer) distils into the adapted model through the loop, every
strategy, resumed with the same curve, and under DeepSpeed ZeRO-3 with the curve of plain torch."""

from __future__ import annotations

import copy

import pytest
import torch

from tests.training.lapt_tiny_world import ENGLISH, ITALIAN, make_model, make_tokenizer
from vocadapt.components.metric_logging import InMemoryLogger
from vocadapt.components.training import LaptData, LaptHooks, LaptRuntime, LaptSettings, train_lapt
from vocadapt.components.training.objectives import Distillation

DATA = LaptData({"target": ITALIAN * 2, "source": ENGLISH * 2})


@pytest.fixture(scope="module")
def teacher_tokenizer():
    """The source model's tokenizer: smaller, so it splits the same text differently from the student's."""
    return make_tokenizer(vocab_size=270)


@pytest.fixture(scope="module")
def teacher_model(teacher_tokenizer):
    return make_model(len(teacher_tokenizer), seed=7)


def _settings(**kwargs):
    options = dict(max_steps=4, batch_size=2, sequence_length=24, learning_rate=1e-2, warmup_steps=1, seed=0,
                   objective="clm+distill", distill_weight=0.5)
    options.update(kwargs)
    return LaptSettings(**options)


def _distillation(teacher_model, teacher_tokenizer, tokenizer):
    return Distillation(copy.deepcopy(teacher_model), teacher_tokenizer, tokenizer)


@pytest.mark.parametrize("objective", ["distill", "clm+distill", "mtp+distill"])
@pytest.mark.parametrize("strategy", ["full", "lora", "two-stage", "2x2-ls"])
def test_every_strategy_distils_and_logs_every_term(tokenizer, teacher_tokenizer, teacher_model, strategy, objective):
    logger = InMemoryLogger()
    settings = _settings(strategy=strategy, objective=objective, lora_rank=4, peak_flops=1e12)
    model = make_model(len(tokenizer), layers=6, tie=strategy != "lora")
    result = train_lapt(model, tokenizer, DATA, settings,
                        hooks=LaptHooks(logger=logger),
                        runtime=LaptRuntime(distillation=_distillation(teacher_model, teacher_tokenizer, tokenizer)))
    assert result.steps == 4 and type(result.model).__name__ == "LlamaForCausalLM"
    for name in ("loss", "objective_loss", "distill_loss", "distill_groups", "teacher_tokens_per_second", "mfu",
                 "mfu_teacher", "mfu_with_teacher"):
        assert len(logger.series(name)) == 4, name
    assert all(value > 0 for _, value in logger.series("distill_loss"))
    if objective == "distill":  # nothing else is trained
        assert logger.series("objective_loss") == logger.series("distill_loss")
    if objective == "mtp+distill":
        assert len(logger.series("mtp_loss")) == 4


def test_distillation_brings_the_student_closer_to_the_teacher(tokenizer, teacher_tokenizer, teacher_model):
    settings = _settings(objective="distill", max_steps=12, learning_rate=3e-3)
    logger = InMemoryLogger()
    train_lapt(make_model(len(tokenizer)), tokenizer, DATA, settings,
               hooks=LaptHooks(logger=logger),
               runtime=LaptRuntime(distillation=_distillation(teacher_model, teacher_tokenizer, tokenizer)))
    losses = [value for _, value in logger.series("distill_loss")]
    assert sum(losses[-3:]) < sum(losses[:3])


def test_a_student_that_is_its_teacher_learns_nothing_from_it(tokenizer):
    model = make_model(len(tokenizer))
    teacher = copy.deepcopy(model)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    logger = InMemoryLogger()
    result = train_lapt(model, tokenizer, DATA, _settings(objective="distill", max_grad_norm=None),
                        hooks=LaptHooks(logger=logger),
                        runtime=LaptRuntime(distillation=Distillation(teacher, tokenizer, tokenizer)))
    assert max(value for _, value in logger.series("distill_loss")) < 1e-6
    for name, p in result.model.named_parameters():
        assert torch.allclose(p, before[name], atol=1e-5), name


def test_distill_without_a_teacher_is_refused(tokenizer):
    with pytest.raises(ValueError, match="teacher"):
        train_lapt(make_model(len(tokenizer)), tokenizer, DATA, _settings())


@pytest.mark.parametrize("strategy", ["full", "two-stage"])
def test_a_resumed_distillation_follows_the_uninterrupted_curve(tokenizer, teacher_tokenizer, teacher_model, tmp_path,
                                                                strategy):
    settings = _settings(strategy=strategy, max_steps=6, checkpoint_every=3, stage_one_steps=3, warmup_steps=2)
    saved = {}

    def keep(step, write, metrics):
        write(tmp_path / f"step-{step}")
        saved[step] = tmp_path / f"step-{step}"

    straight = train_lapt(make_model(len(tokenizer)), tokenizer, DATA, settings,
                          hooks=LaptHooks(on_checkpoint=keep),
                          runtime=LaptRuntime(distillation=_distillation(teacher_model, teacher_tokenizer, tokenizer)))
    resumed = train_lapt(make_model(len(tokenizer), seed=1), tokenizer, DATA, settings,
                         runtime=LaptRuntime(distillation=_distillation(teacher_model, teacher_tokenizer, tokenizer),
                                             resume_state=saved[3]))
    assert [s for s, _ in resumed.history] == [1, 2, 3, 4, 5, 6]
    for name in ("loss", "distill_loss"):
        for (_, a), (_, b) in zip(straight.series(name), resumed.series(name)):
            assert a == pytest.approx(b, abs=1e-5), name
    for (name, p), q in zip(straight.model.named_parameters(), resumed.model.parameters()):
        assert torch.allclose(p, q, atol=1e-5), name


@pytest.fixture()
def process_group(gloo_process_group):
    return gloo_process_group


@pytest.mark.timeout(600)
@pytest.mark.parametrize("zero_stage", [2, 3])
def test_deepspeed_distillation_follows_the_plain_curve(process_group, tokenizer, teacher_tokenizer, teacher_model,
                                                        zero_stage):
    from vocadapt.platform.lapt.deepspeed_config import deepspeed_engine_factory

    settings = _settings(max_steps=3)
    plain = train_lapt(make_model(len(tokenizer)), tokenizer, DATA, settings,
                       runtime=LaptRuntime(distillation=_distillation(teacher_model, teacher_tokenizer, tokenizer)))
    factory = deepspeed_engine_factory({"enabled": True, "zero_stage": zero_stage}, settings)
    result = train_lapt(make_model(len(tokenizer)), tokenizer, DATA, settings,
                        runtime=LaptRuntime(distillation=_distillation(teacher_model, teacher_tokenizer, tokenizer),
                                            engine_factory=factory))
    for name in ("loss", "distill_loss", "objective_loss"):
        for (_, a), (_, b) in zip(plain.series(name), result.series(name)):
            assert a == pytest.approx(b, abs=1e-4), name
