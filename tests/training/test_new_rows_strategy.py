"""Strategy ``new-rows``: only the embedding and LM-head rows an expansion added learn, in the loop.

The tiny world: the 300-token tokenizer plays the expanded one and its first 260 tokens the source's (BPE learns its
merges in order, so a 260-token tokenizer trained on the same text is exactly that prefix; checked below); ids
260..299 are the tokens the expansion added.
"""

from __future__ import annotations

import pytest
import torch

from tests.training.lapt_tiny_world import ENGLISH, ITALIAN, make_model, make_tokenizer
from vocadapt.components.training import LaptData, LaptHooks, LaptRuntime, LaptSettings, train_lapt
from vocadapt.components.training.engine import TorchEngine
from vocadapt.components.training.strategies import NewRows

pytestmark = pytest.mark.timeout(600)
DATA = LaptData({"target": ITALIAN, "source": ENGLISH})
SOURCE_ROWS = 260


def _expanded_model(vocabulary: int, *, tie: bool):
    model = make_model(vocabulary, tie=tie)
    model.config.vocadapt_init = {"mode": "expand", "new_id_ranges": [[SOURCE_ROWS, vocabulary]]}
    return model


def _settings(**changes) -> LaptSettings:
    return LaptSettings(**{"strategy": "new-rows", "max_steps": 4, "batch_size": 2, "sequence_length": 32,
                           "learning_rate": 5e-2, "warmup_steps": 0, **changes})


def _recording_engines(held: list):
    def factory(module, params, spec):
        held.append(TorchEngine(module, params, spec))
        return held[-1]

    return factory


@pytest.fixture(scope="module")
def source_tokenizer(tokenizer):
    source = make_tokenizer(SOURCE_ROWS)
    assert len(source) == SOURCE_ROWS
    assert all(tokenizer.get_vocab()[token] == index for token, index in source.get_vocab().items())
    return source


@pytest.mark.parametrize("tie", [True, False], ids=["tied", "untied"])
def test_only_the_new_rows_learn_and_the_optimizer_holds_only_them(tokenizer, tie):
    vocabulary = len(tokenizer)
    model = _expanded_model(vocabulary, tie=tie)
    hidden = model.config.hidden_size
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    keys = set(model.state_dict())
    held: list = []
    result = train_lapt(model, tokenizer, DATA, _settings(),
                        runtime=LaptRuntime(engine_factory=_recording_engines(held)))

    blocks = 1 if tie else 2
    assert result.trainable_parameters == {"new-rows": blocks * (vocabulary - SOURCE_ROWS) * hidden}
    matrices = {"model.embed_tokens.weight", "lm_head.weight"}
    for name, param in result.model.named_parameters():
        if name in matrices:  # source rows byte for byte, new rows trained
            assert torch.equal(param[:SOURCE_ROWS], before[name][:SOURCE_ROWS]), name
            assert not torch.equal(param[SOURCE_ROWS:], before[name][SOURCE_ROWS:]), name
        else:  # every body parameter byte for byte
            assert torch.equal(param, before[name]), name
    assert {name for name, _ in result.model.named_parameters()} == set(before)
    assert set(result.model.state_dict()) == keys  # the usual layout again: no trainable block left behind
    assert (result.model.lm_head.weight is result.model.model.embed_tokens.weight) == tie
    assert not model.model.embed_tokens._forward_hooks and not model.lm_head._forward_hooks

    (engine,) = held
    states = list(engine.optimizer.state.values())
    assert len(states) == blocks
    for state in states:  # Adam's moments: [new, hidden] only, never the vocabulary's matrix
        shapes = {tuple(value.shape) for value in state.values() if value.ndim}
        assert shapes == {(vocabulary - SOURCE_ROWS, hidden)}
    assert sum(p.numel() for group in engine.optimizer.param_groups for p in group["params"]) == \
        blocks * (vocabulary - SOURCE_ROWS) * hidden


@pytest.mark.parametrize("tie", [True, False], ids=["tied", "untied"])
def test_source_text_keeps_its_logits_over_the_source_vocabulary(tokenizer, source_tokenizer, tie):
    """On text tokenized with source tokens only, the logits of every old id are byte-identical after training;
    the probabilities of old ids are all scaled by one factor per position (the new entries' share)."""
    model = _expanded_model(len(tokenizer), tie=tie)
    batch = source_tokenizer(ENGLISH[:4], return_tensors="pt", padding=True)
    assert int(batch.input_ids.max()) < SOURCE_ROWS
    with torch.no_grad():
        old = model(**batch).logits.clone()
    trained = train_lapt(model, tokenizer, DATA, _settings()).model
    with torch.no_grad():
        new = trained(**batch).logits
    assert torch.equal(new[..., :SOURCE_ROWS], old[..., :SOURCE_ROWS])
    assert not torch.equal(new[..., SOURCE_ROWS:], old[..., SOURCE_ROWS:])
    shift = torch.log_softmax(new, -1)[..., :SOURCE_ROWS] - torch.log_softmax(old[..., :SOURCE_ROWS], -1)
    assert torch.allclose(shift, shift[..., :1].expand_as(shift), atol=1e-5)
    assert float(shift.max()) < 0  # the source tokens gave up some probability, to the new ones only


def test_distillation_trains_the_new_rows_only(tokenizer, source_tokenizer):
    """Objective distill: the teacher (the source model, its own tokenizer) and the student's slabbed head go
    through the hooks too."""
    from vocadapt.components.training.objectives import Distillation

    model = _expanded_model(len(tokenizer), tie=False)
    teacher = make_model(SOURCE_ROWS, tie=False, seed=1)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    result = train_lapt(model, tokenizer, DATA, _settings(objective="distill", max_steps=2),
                        runtime=LaptRuntime(distillation=Distillation(teacher, source_tokenizer, tokenizer)))
    assert result.series("distill_loss")
    for name, param in result.model.named_parameters():
        rows = SOURCE_ROWS if name in ("model.embed_tokens.weight", "lm_head.weight") else None
        assert torch.equal(param[:rows], before[name][:rows]), name
    assert not torch.equal(result.model.lm_head.weight[SOURCE_ROWS:], before["lm_head.weight"][SOURCE_ROWS:])


def test_resuming_from_a_checkpoint_gives_the_uninterrupted_rows(tokenizer, tmp_path):
    written = {}

    def hook(step, write, metrics):
        write(tmp_path / f"step{step}")
        written[step] = tmp_path / f"step{step}"

    settings = _settings(checkpoint_every=2)
    straight = train_lapt(_expanded_model(len(tokenizer), tie=False), tokenizer, DATA, settings,
                          hooks=LaptHooks(on_checkpoint=hook))
    resumed = train_lapt(_expanded_model(len(tokenizer), tie=False), tokenizer, DATA, settings,
                         runtime=LaptRuntime(resume_state=written[2]))
    for (name, p), q in zip(straight.model.named_parameters(), resumed.model.parameters()):
        assert torch.equal(p, q), name


def test_refusals_name_the_fix(tokenizer):
    model = make_model(len(tokenizer))
    with pytest.raises(ValueError, match="no record of an expansion.*init.mode expand"):
        train_lapt(model, tokenizer, DATA, _settings())
    model.config.vocadapt_init = {"mode": "replace", "new_id_ranges": [[0, 4]]}
    with pytest.raises(ValueError, match="strategy 'new-rows'.*init.mode expand"):
        train_lapt(model, tokenizer, DATA, _settings())
    for objective in ("mtp", "mtp+distill"):
        with pytest.raises(ValueError, match="whole extra head.*objective clm"):
            _settings(objective=objective)
    with pytest.raises(ValueError, match="outside the matrices"):
        NewRows.install(make_model(len(tokenizer)), [len(tokenizer)])


def test_the_config_names_it_and_refuses_what_cannot_work():
    from vocadapt.platform.config import ConfigError, ExperimentConfig, load_config

    config = load_config("configs/italian-smollm2-expand.yaml", ["lapt.strategy=new-rows"])
    assert config.lapt.strategy == "new-rows" and config.init.mode == "expand"
    again = ExperimentConfig.model_validate(config.model_dump())
    assert again.lapt.strategy == "new-rows" and again.lapt == config.lapt
    assert LaptSettings.model_validate(config.lapt.model_dump(include=set(LaptSettings.model_fields))).strategy \
        == "new-rows"
    with pytest.raises(ConfigError, match="keeps no source rows.*init.mode expand"):
        load_config("configs/italian-smollm2.yaml", ["lapt.strategy=new-rows"])
    with pytest.raises(ConfigError, match="ZeRO-3.*zero_stage 1 or 2"):
        load_config("configs/italian-smollm2-expand.yaml", ["lapt.strategy=new-rows", "lapt.deepspeed.enabled=true",
                                                            "lapt.deepspeed.zero_stage=3"])


def test_deepspeed_zero2_follows_the_plain_curve_and_holds_only_the_new_rows(gloo_process_group, tokenizer):
    from vocadapt.platform.lapt.deepspeed_config import deepspeed_engine_factory

    settings = _settings(max_steps=3)
    build, held = deepspeed_engine_factory({"enabled": True, "zero_stage": 2}, settings), []

    def factory(module, params, spec):
        held.append(build(module, params, spec))
        return held[-1]

    model = _expanded_model(len(tokenizer), tie=False)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    plain = train_lapt(_expanded_model(len(tokenizer), tie=False), tokenizer, DATA, settings)
    result = train_lapt(model, tokenizer, DATA, settings, runtime=LaptRuntime(engine_factory=factory))
    new_rows = (len(tokenizer) - SOURCE_ROWS) * model.config.hidden_size
    assert [engine.optimizer_parameter_count() for engine in held] == [2 * new_rows]
    for (_, a), (_, b) in zip(plain.series("loss"), result.series("loss")):
        assert a == pytest.approx(b, abs=1e-4)
    for (name, p), q in zip(result.model.named_parameters(), plain.model.parameters()):
        rows = SOURCE_ROWS if name in ("model.embed_tokens.weight", "lm_head.weight") else None
        assert torch.equal(p[:rows], before[name][:rows]), name
        assert torch.allclose(p, q, atol=1e-4), name


def test_zero3_is_refused_before_a_step(gloo_process_group, tokenizer):
    from vocadapt.platform.lapt.deepspeed_config import deepspeed_engine_factory

    settings = _settings(max_steps=1)
    factory = deepspeed_engine_factory({"enabled": True, "zero_stage": 3}, settings)
    with pytest.raises(ValueError, match="ZeRO-3.*zero_stage 1 or 2"):
        train_lapt(_expanded_model(len(tokenizer), tie=False), tokenizer, DATA, settings,
                   runtime=LaptRuntime(engine_factory=factory))
