"""Strategy ``new-head``: only the new LM-head rows learn, on the frozen model's hidden states."""

import pytest
import torch

from tests.training.lapt_tiny_world import ENGLISH, ITALIAN, make_model
from vocadapt.components.metric_logging import InMemoryLogger
from vocadapt.components.training import LaptData, LaptHooks, LaptRuntime, LaptSettings, train_lapt
from vocadapt.components.training.head_fit import HeadFitSettings, fit_new_output_rows, new_token_ids_of

VOCABULARY, NEW = 48, list(range(40, 48))  # ids 40..47 play the tokens an expansion added


def _planted_batches(seed: int = 0):
    """Random old-token sequences in which token 7 is always followed by the new token 44."""
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(6):
        ids = torch.randint(0, 40, (4, 24), generator=generator)
        ids[:, ::3] = 7
        ids[:, 1::3] = 44
        batches.append((ids, torch.ones_like(ids)))
    return batches


def _next_token_after(model, token: int) -> int:
    with torch.no_grad():
        return int(model(torch.tensor([[3, token]])).logits[0, -1].argmax())


def test_only_the_new_head_rows_learn_and_the_model_writes_them():
    model = make_model(VOCABULARY, tie=True)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    assert _next_token_after(model, 7) != 44
    result = fit_new_output_rows(model, _planted_batches(), NEW, HeadFitSettings(passes=20, learning_rate=5e-2, untie=True))
    assert result.untied and model.config.tie_word_embeddings is False
    assert model.lm_head.weight is not model.model.embed_tokens.weight
    assert result.loss_after < result.loss_before
    assert result.new_targets == 6 * 4 * 8  # each 7 -> 44 pair whose 44 is inside the sequence
    assert _next_token_after(model, 7) == 44  # it now writes the new token where the data has it
    head = model.lm_head.weight.detach()
    old = [i for i in range(VOCABULARY) if i not in NEW]
    assert torch.equal(head[old], before["model.embed_tokens.weight"][old])  # old head rows: bit for bit
    assert not torch.equal(head[NEW], before["model.embed_tokens.weight"][NEW])
    for name, param in model.named_parameters():  # body and input rows, new ones included, as they were
        if name != "lm_head.weight":
            assert torch.equal(param, before[name]), name


def test_a_tied_model_stays_tied_by_default_and_only_its_new_rows_change():
    model = make_model(VOCABULARY, tie=True)
    before = model.model.embed_tokens.weight.detach().clone()
    result = fit_new_output_rows(model, _planted_batches(), NEW, HeadFitSettings(passes=20, learning_rate=5e-2))
    assert not result.untied and model.lm_head.weight is model.model.embed_tokens.weight
    assert torch.equal(model.lm_head.weight.detach()[:40], before[:40])
    assert _next_token_after(model, 7) == 44


def test_same_seed_same_rows_byte_for_byte():
    rows = []
    for _ in range(2):
        model = make_model(VOCABULARY, tie=False)
        fit_new_output_rows(model, _planted_batches(), NEW, HeadFitSettings(passes=3, seed=5))
        rows.append(model.lm_head.weight.detach()[NEW].numpy().tobytes())
    assert rows[0] == rows[1]


def test_an_untied_head_stays_untied_and_its_old_rows_stay():
    model = make_model(VOCABULARY, tie=False)
    old_head = model.lm_head.weight.detach().clone()
    result = fit_new_output_rows(model, _planted_batches(), NEW, HeadFitSettings(passes=2))
    assert not result.untied
    assert torch.equal(model.lm_head.weight.detach()[:40], old_head[:40])


def _noise_batches(seed: int):
    """Uniformly random tokens, new ones included: nothing in them generalises."""
    generator = torch.Generator().manual_seed(seed)
    return [(ids, torch.ones_like(ids)) for ids in (torch.randint(0, VOCABULARY, (4, 24), generator=generator)
                                                    for _ in range(6))]


def _mean_loss(model, batches) -> float:
    with torch.no_grad():
        losses = [torch.nn.functional.cross_entropy(model(ids).logits[0, :-1], ids[0, 1:]) for ids, _ in batches]
    return float(torch.stack(losses).mean())


def test_the_held_out_check_keeps_a_fit_that_generalises():
    model = make_model(VOCABULARY, tie=False)
    result = fit_new_output_rows(model, _planted_batches(), NEW, HeadFitSettings(passes=20, learning_rate=5e-2))
    assert result.validation_positions > 0 and result.kept_update > 0
    assert result.validation_loss_after < result.validation_loss_before
    assert result.metrics()["head_fit_validation_loss_after"] == result.validation_loss_after
    assert _next_token_after(model, 7) == 44


def test_the_held_out_check_refuses_rows_that_only_fit_their_own_positions():
    """Strong fit on noise: its own loss falls, fresh text's rises; with the held-out check the rows stay."""
    fresh = _noise_batches(99)
    unchecked, checked = make_model(VOCABULARY, tie=False), make_model(VOCABULARY, tie=False)
    before = _mean_loss(unchecked, fresh)
    initial_rows = checked.lm_head.weight.detach()[NEW].clone()
    overfit = fit_new_output_rows(unchecked, _noise_batches(0), NEW, HeadFitSettings(
        passes=40, learning_rate=0.3, positions_per_update=64, validation_fraction=0))
    assert overfit.loss_after < overfit.loss_before and _mean_loss(unchecked, fresh) > before + 0.1
    result = fit_new_output_rows(checked, _noise_batches(0), NEW, HeadFitSettings(
        passes=40, learning_rate=0.3, positions_per_update=64, validation_fraction=0.25))
    assert result.kept_update == 0 and result.updates > 0
    assert result.validation_loss_after == result.validation_loss_before
    assert torch.equal(checked.lm_head.weight.detach()[NEW], initial_rows)
    assert _mean_loss(checked, fresh) == pytest.approx(before)


def test_without_the_check_every_position_fits_and_the_last_rows_stay():
    model = make_model(VOCABULARY, tie=False)
    result = fit_new_output_rows(model, _planted_batches(), NEW, HeadFitSettings(passes=3, validation_fraction=0))
    assert result.validation_positions == 0 and result.validation_loss_before is None
    assert result.kept_update == result.updates == 3 * 1  # 552 positions: one update of 4,096 per pass
    assert "head_fit_validation_loss_after" not in result.metrics()


def test_bad_inputs_are_named():
    model = make_model(VOCABULARY)
    with pytest.raises(ValueError, match="past the head"):
        fit_new_output_rows(model, _planted_batches(), [VOCABULARY + 3])
    with pytest.raises(ValueError, match="passes"):
        fit_new_output_rows(model, _planted_batches(), NEW, HeadFitSettings(passes=0))
    with pytest.raises(ValueError, match="validation_fraction"):
        fit_new_output_rows(model, _planted_batches(), NEW, HeadFitSettings(validation_fraction=1.0))
    with pytest.raises(ValueError, match="init.mode expand"):  # no record of an expansion
        new_token_ids_of(model)
    model.config.vocadapt_init = {"mode": "replace", "new_id_ranges": [[0, 4]]}
    with pytest.raises(ValueError, match="init.mode expand"):
        new_token_ids_of(model)
    with pytest.raises(ValueError, match="objective clm"):
        LaptSettings(strategy="new-head", objective="mtp", max_steps=2)


def test_lapt_strategy_new_head_fits_the_recorded_expansion(tokenizer):
    model = make_model(len(tokenizer), tie=True)
    vocabulary = len(tokenizer)
    model.config.vocadapt_init = {"mode": "expand", "new_id_ranges": [[vocabulary - 40, vocabulary]]}
    assert new_token_ids_of(model) == list(range(vocabulary - 40, vocabulary))
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    logger = InMemoryLogger()
    settings = LaptSettings(strategy="new-head", max_steps=3, batch_size=2, sequence_length=16, learning_rate=1e-2,
                            head_fit_passes=4, seed=0)
    result = train_lapt(model, tokenizer, LaptData({"target": ITALIAN * 2, "source": ENGLISH * 2}), settings,
                        hooks=LaptHooks(logger=logger),
                        runtime=LaptRuntime(eval_documents={"target": ITALIAN[:2]}))
    assert result.steps == 3 and result.tokens == 3 * 2 * 16
    assert result.trainable_parameters == {"new-head": 40 * model.config.hidden_size}
    (step, metrics), = result.history
    assert step == 3 and metrics["head_fit_loss_after"] <= metrics["head_fit_loss_before"]
    assert "bits_per_byte_target" in metrics
    changed = {name for name, p in result.model.named_parameters()
               if name not in before or not torch.equal(p, before[name])}
    assert changed == {"model.embed_tokens.weight"}  # tied: the one shared matrix, its new rows only
    weight = result.model.model.embed_tokens.weight.detach()
    assert torch.equal(weight[: vocabulary - 40], before["model.embed_tokens.weight"][: vocabulary - 40])


def test_head_fit_after_lapt_runs_once_after_the_last_step(tokenizer):
    model = make_model(len(tokenizer), tie=True)
    vocabulary = len(tokenizer)
    model.config.vocadapt_init = {"mode": "expand", "new_id_ranges": [[vocabulary - 40, vocabulary]]}
    settings = LaptSettings(strategy="full", max_steps=3, batch_size=2, sequence_length=16, learning_rate=1e-3,
                            head_fit_after=True, head_fit_learning_rate=1e-2, head_fit_passes=2, seed=0)
    result = train_lapt(model, tokenizer, LaptData({"target": ITALIAN * 2, "source": ENGLISH * 2}), settings,
                        hooks=LaptHooks(logger=InMemoryLogger()))
    assert result.steps == 4 and result.tokens == 2 * 3 * 2 * 16  # the fit packs a budget of the same size
    assert set(result.trainable_parameters) == {"full", "new-head"}
    steps = [step for step, _ in result.history]
    assert steps == [1, 2, 3, 4] and "head_fit_loss_after" in result.history[-1][1]
    assert result.history[-1][1]["learning_rate"] == 1e-2
    capped = LaptSettings(strategy="new-head", max_steps=3, batch_size=2, sequence_length=16, head_fit_tokens=40,
                          head_fit_passes=1, seed=0)
    model = make_model(len(tokenizer), tie=True)
    model.config.vocadapt_init = {"mode": "expand", "new_id_ranges": [[vocabulary - 40, vocabulary]]}
    result = train_lapt(model, tokenizer, LaptData({"target": ITALIAN * 2, "source": ENGLISH * 2}), capped)
    assert result.tokens == 2 * 2 * 16  # 40 tokens round up to two micro-batches of 32
    with pytest.raises(ValueError, match="set one of them"):
        LaptSettings(strategy="new-head", head_fit_after=True, max_steps=2)


def test_micro_batches_are_stacked_into_larger_forwards_with_the_same_hidden_states(monkeypatch):
    """The loop's micro-batches are stacked up to FORWARD_TOKENS per forward (in order, never mixing sequence
    lengths); each sequence's hidden states are what its own forward gives."""
    from vocadapt.components.training import head_fit

    batches = _planted_batches() + [(torch.randint(0, 40, (2, 10)), torch.ones(2, 10, dtype=torch.long))]
    monkeypatch.setattr(head_fit, "FORWARD_TOKENS", 4 * 24 * 2)  # two micro-batches of 4 x 24 per forward
    stacked = list(head_fit._stacked(batches))
    assert [tuple(ids.shape) for ids, _ in stacked] == [(8, 24), (8, 24), (8, 24), (2, 10)]
    assert torch.equal(torch.cat([ids for ids, _ in stacked[:3]]), torch.cat([ids for ids, _ in batches[:6]]))
    model = make_model(VOCABULARY, tie=True).eval()
    together, targets, sequences = head_fit._hidden_states(model, batches)
    monkeypatch.setattr(head_fit, "FORWARD_TOKENS", 1)  # one micro-batch per forward, as before
    alone, alone_targets, alone_sequences = head_fit._hidden_states(model, batches)
    torch.testing.assert_close(together, alone, rtol=1e-5, atol=1e-5)
    assert torch.equal(targets, alone_targets) and torch.equal(sequences, alone_sequences)


def test_a_bf16_fit_gives_hidden_states_close_to_float32_and_the_same_fit(tokenizer, monkeypatch):
    """head_fit_bf16 runs the products under bf16 autocast: the hidden states stay float32 and within a few percent,
    the planted pattern is learnt as in float32, and the setting reaches the fit from LAPT's settings."""
    from vocadapt.components.training import head_fit

    model = make_model(VOCABULARY, tie=True).eval()
    full, _, _ = head_fit._hidden_states(model, _planted_batches())
    half, _, _ = head_fit._hidden_states(model, _planted_batches(), bf16=True)
    assert half.dtype == torch.float32 and not torch.equal(full, half)
    assert float((half - full).norm() / full.norm()) < 0.05
    result = fit_new_output_rows(model, _planted_batches(), NEW, HeadFitSettings(passes=20, learning_rate=5e-2, bf16=True))
    assert result.loss_after < result.loss_before and _next_token_after(model, 7) == 44
    seen = []
    original = head_fit._hidden_states

    def spy(model, batches, bf16=False, progress=None):
        seen.append(bf16)
        return original(model, batches, bf16, progress)

    vocabulary = len(tokenizer)
    lm = make_model(vocabulary, tie=True)
    lm.config.vocadapt_init = {"mode": "expand", "new_id_ranges": [[vocabulary - 40, vocabulary]]}
    settings = LaptSettings(strategy="new-head", max_steps=1, batch_size=2, sequence_length=16, head_fit_passes=1,
                            head_fit_bf16=True, seed=0)
    monkeypatch.setattr(head_fit, "_hidden_states", spy)
    train_lapt(lm, tokenizer, LaptData({"target": ITALIAN * 2, "source": ENGLISH * 2}), settings)
    assert seen == [True]


def test_the_reported_fit_loss_reads_a_sample_of_the_positions_and_the_rows_are_the_same(monkeypatch):
    """loss_before / loss_after come from at most METRIC_POSITIONS evenly spaced positions; the fitted rows do not
    depend on how many positions the report reads."""
    from vocadapt.components.training import head_fit

    def fit(sample: int):
        monkeypatch.setattr(head_fit, "METRIC_POSITIONS", sample)
        model = make_model(VOCABULARY, tie=False)
        result = fit_new_output_rows(model, _planted_batches(), NEW,
                                     HeadFitSettings(passes=3, learning_rate=5e-2, validation_fraction=0))
        return result, model.lm_head.weight.detach().clone()

    everything, rows = fit(10**9)
    sampled, sampled_rows = fit(50)
    assert torch.equal(rows, sampled_rows)
    assert sampled.positions == everything.positions
    assert sampled.loss_after < sampled.loss_before and sampled.loss_before != everything.loss_before


def test_the_fit_reports_its_forwards_then_its_updates(tokenizer):
    """The head fit says how far it is (the console's bar follows it): every forward, then every update, ending at
    its total; through train_lapt the phases are named for the console."""
    seen = []
    model = make_model(VOCABULARY, tie=True)
    fit_new_output_rows(model, _planted_batches(), NEW, HeadFitSettings(passes=3, learning_rate=5e-2, positions_per_update=64),
                        progress=lambda phase, done, total: seen.append((phase, done, total)))
    phases = [phase for phase, _, _ in seen]
    order = ["hidden states", "old rows' logits", "updates"]
    assert phases == sorted(phases, key=order.index) and set(phases) == set(order)  # forwards, old rows, updates
    forwards = [(done, total) for phase, done, total in seen if phase == "hidden states"]
    old_rows = [(done, total) for phase, done, total in seen if phase == "old rows' logits"]
    assert old_rows[-1][0] == old_rows[-1][1] >= 1 and [d for d, _ in old_rows] == list(range(len(old_rows)))
    updates = [(done, total) for phase, done, total in seen if phase == "updates"]
    assert forwards[-1][0] == forwards[-1][1] >= 1 and [d for d, _ in forwards] == list(range(len(forwards)))
    assert updates[-1][0] == updates[-1][1] == len(updates) and updates[-1][1] % 3 == 0  # passes x updates a pass

    named = []
    model = make_model(len(tokenizer), tie=True)
    model.config.vocadapt_init = {"mode": "expand", "new_id_ranges": [[len(tokenizer) - 40, len(tokenizer)]]}
    settings = LaptSettings(strategy="new-head", max_steps=2, batch_size=2, sequence_length=16, learning_rate=1e-2,
                            head_fit_passes=2, seed=0)
    train_lapt(model, tokenizer, LaptData({"target": ITALIAN * 2, "source": ENGLISH * 2}), settings,
               hooks=LaptHooks(on_phase=lambda phase, done, total: named.append(phase)))
    assert set(named) == {"head fit: hidden states", "head fit: old rows' logits", "head fit: updates"}


@pytest.mark.parametrize("bf16", (False, True))
@pytest.mark.parametrize("with_bias", (False, True))
def test_the_old_rows_log_sum_exp_taken_a_few_positions_at_a_time_is_the_whole_chunks(bf16, with_bias, monkeypatch):
    """On a CPU the old rows' log-sum-exp runs CPU_LOG_SUM_EXP_POSITIONS positions at a time (the logits stay in
    the cache): the values of one product over the whole chunk under autocast, as the fit computed it before, to
    float rounding (the matrix library may block a product of 7 rows otherwise than one of 300; at the demo's
    shape they were the same bytes, benchmarks/head_fit_speed.py), and the same bytes again when run again."""
    from vocadapt.components.training import head_fit

    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(300, 32, generator=generator)
    old_rows = torch.randn(500, 32, generator=generator) * 0.3
    bias = torch.randn(500, generator=generator) if with_bias else None
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits = (hidden @ old_rows.T).float()
    whole = torch.logsumexp(logits + bias if with_bias else logits, dim=-1)
    monkeypatch.setattr(head_fit, "CPU_LOG_SUM_EXP_POSITIONS", 7)  # a remainder in the last block, too
    product_rows = old_rows.to(torch.bfloat16) if bf16 else old_rows  # as the fit casts them, once
    blocked = head_fit.old_rows_log_sum_exp(hidden, product_rows, bias)
    torch.testing.assert_close(blocked, whole, rtol=1e-6, atol=1e-6)
    assert blocked.dtype == torch.float32
    assert torch.equal(head_fit.old_rows_log_sum_exp(hidden, product_rows, bias), blocked)


def test_an_update_summed_over_blocks_of_positions_fits_the_rows_of_one_product(monkeypatch):
    """On a CPU each update's gradient is summed over CPU_UPDATE_POSITIONS positions at a time: the rows of a fit
    whose updates are split into blocks of 5 positions are the whole-update fit's to rounding, and a second run gives
    the same bytes."""
    from vocadapt.components.training import head_fit

    def fit(at_once: int) -> torch.Tensor:
        monkeypatch.setattr(head_fit, "CPU_UPDATE_POSITIONS", at_once)
        model = make_model(VOCABULARY, tie=False)
        fit_new_output_rows(model, _planted_batches(), NEW, HeadFitSettings(passes=3, learning_rate=5e-2,
                                                                            positions_per_update=64))
        return model.lm_head.weight.detach()[NEW].clone()

    whole = fit(10**9)
    blocks = fit(5)
    torch.testing.assert_close(blocks, whole, rtol=1e-4, atol=1e-5)
    assert torch.equal(fit(5), blocks)
