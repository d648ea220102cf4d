"""LAPT objectives on a tiny world: clm, distill and their combinations give the losses and gradients of the plain
computation on full logits, and a student identical to its teacher has nothing to learn."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from vocadapt.components.training.alm import AlmSide, alm_loss
from vocadapt.components.training.data import LaptData, PackedMixture
from vocadapt.components.training.mtp import MultiTokenPrediction
from vocadapt.components.training.objectives import Distillation, LaptObjective, objective_terms


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory, fixture_corpora):
    from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, train_tokenizer

    root = tmp_path_factory.mktemp("objectives")
    corpus = [fixture_corpora["it.train"]]
    return (train_tokenizer(corpus, TokenizerTrainingSpec("bytelevel-bpe", 300), root / "teacher", show_progress=False),
            train_tokenizer(corpus, TokenizerTrainingSpec("bytelevel-bpe", 600), root / "student", show_progress=False))


@pytest.fixture(scope="module")
def rows(tokenizers, fixture_corpora):
    documents = fixture_corpora["it.validation"].read_text(encoding="utf-8").splitlines()[:30]
    mixture = PackedMixture(LaptData({"target": documents}), tokenizers[1], mixing={"target": 1.0},
                            sequence_length=40)
    return mixture.next_batch(3).input_ids


def _lm(vocab: int, seed: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=4, tie_word_embeddings=False))


@pytest.mark.parametrize("objective, terms", [
    ("clm", {"clm"}), ("mtp", {"clm", "mtp"}), ("distill", {"distill"}), ("clm+distill", {"clm", "distill"}),
    ("mtp+distill", {"clm", "mtp", "distill"})])
def test_objective_terms(objective, terms):
    assert objective_terms(objective) == terms


def test_an_unknown_term_is_named():
    with pytest.raises(ValueError, match=r"\['kd'\]"):
        objective_terms("clm+kd")


def test_distill_needs_a_teacher():
    with pytest.raises(ValueError, match="teacher"):
        LaptObjective("clm+distill")


def test_a_student_identical_to_its_teacher_has_zero_distillation_loss_and_gradient(tokenizers, rows):
    _, student_tokenizer = tokenizers
    student = _lm(len(student_tokenizer), 0)
    teacher = copy.deepcopy(student)
    objective = LaptObjective("distill", distillation=Distillation(teacher, student_tokenizer, student_tokenizer))
    out = objective(student, rows, torch.ones_like(rows))
    assert abs(float(out.loss.detach())) < 1e-6 and float(out.terms["distill_groups"]) > 50
    out.loss.backward()
    assert max(p.grad.abs().max() for p in student.parameters() if p.grad is not None) < 1e-6


def _plain_alm(teacher, student, batch, rows, distillation):
    """ALM from full logits: the reference for the slab-by-slab path."""
    def scores(model, ids, mask, word_starts):
        logits = model(input_ids=ids, attention_mask=mask).logits.float()
        logp = logits.log_softmax(-1)
        token = torch.cat([torch.zeros(ids.shape[0], 1), logp[:, :-1].gather(-1, ids[:, 1:, None])[..., 0]], 1)
        word = torch.logsumexp(logp.masked_fill(~word_starts[: logits.shape[-1]], float("-inf")), -1)
        return token, word, logits

    with torch.no_grad():
        t_logp, t_word, _ = scores(teacher, batch.input_ids, batch.attention_mask, distillation.teacher_word_starts)
    s_logp, s_word, logits = scores(student, rows, torch.ones_like(rows), distillation.student_word_starts)
    return alm_loss(AlmSide(t_logp, t_word, batch.chunks), AlmSide(s_logp, s_word, batch.student_chunks)).loss, logits


def test_clm_plus_distill_equals_the_full_logits_computation(tokenizers, rows):
    teacher_tokenizer, student_tokenizer = tokenizers
    teacher, student = _lm(len(teacher_tokenizer), 1), _lm(len(student_tokenizer), 2)
    distillation = Distillation(teacher, teacher_tokenizer, student_tokenizer, slab=7)
    out = LaptObjective("clm+distill", distillation=distillation, distill_weight=0.5)(
        student, rows, torch.ones_like(rows))
    grads = torch.autograd.grad(out.loss, list(student.parameters()))

    batch = distillation.view(rows)
    plain_alm, logits = _plain_alm(teacher, student, batch, rows, distillation)
    plain_clm = F.cross_entropy(logits[:, :-1].flatten(0, 1), rows[:, 1:].flatten())
    plain = plain_clm + 0.5 * plain_alm
    expected = torch.autograd.grad(plain, list(student.parameters()))
    assert float(out.terms["next_token_loss"]) == pytest.approx(float(plain_clm.detach()), abs=1e-5)
    assert float(out.terms["distill_loss"]) == pytest.approx(float(plain_alm.detach()), abs=1e-5)
    assert float(out.loss.detach()) > float(out.terms["next_token_loss"])
    for got, want in zip(grads, expected):
        assert torch.allclose(got, want, atol=1e-5, rtol=1e-4)
    assert out.teacher_tokens > rows.numel()  # the 300-token teacher needs more tokens for the same text


def test_mtp_plus_distill_adds_the_extra_heads_loss(tokenizers, rows):
    teacher_tokenizer, student_tokenizer = tokenizers
    student = MultiTokenPrediction(_lm(len(student_tokenizer), 3))
    distillation = Distillation(_lm(len(teacher_tokenizer), 4), teacher_tokenizer, student_tokenizer)
    out = LaptObjective("mtp+distill", distillation=distillation)(student, rows, torch.ones_like(rows))
    reference = student(input_ids=rows, attention_mask=torch.ones_like(rows), labels=rows)
    assert float(out.terms["next_token_loss"]) == pytest.approx(float(reference.next_token_loss.detach()), abs=1e-5)
    mtp = 2 * reference.loss.detach() - reference.next_token_loss.detach()
    assert float(out.terms["mtp_loss"]) == pytest.approx(float(mtp), abs=1e-5)
    out.loss.backward()
    assert student.extra_head.weight.grad.abs().sum() > 0


def test_clm_alone_is_the_models_own_loss(tokenizers, rows):
    student = _lm(len(tokenizers[1]), 5)
    out = LaptObjective("clm")(student, rows, torch.ones_like(rows))
    own = student(input_ids=rows, labels=rows).loss
    assert float(out.loss.detach()) == pytest.approx(float(own.detach()), abs=1e-6)
