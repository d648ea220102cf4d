"""ALM on tiny worlds: chunk boundaries across tokenizer kinds, and a loss that is zero exactly when the student's
chunk likelihoods are the teacher's, with gradient only where they differ."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from vocadapt.components.training.alm import (
    AlmSettings, AlmSide, align_chunks, alm_loss, binary_kl, pad_alignments, sequence_scores, token_texts, word_start_mask)

TEXTS = [
    "Perché la città è già più bella: 3,50 € al caffè.",
    "Il 日本 e l'Ελλάδα sono lontani, ma così vicini!",
    "  due spazi\te una tabulazione\ne un a capo.",
]


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory, fixture_corpora):
    """Real tokenizers of three kinds trained on the Italian slice, and a finer byte-level one."""
    from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, train_tokenizer

    root = tmp_path_factory.mktemp("alm-tokenizers")
    corpus = [fixture_corpora["it.train"]]
    return {
        "bytelevel": train_tokenizer(corpus, TokenizerTrainingSpec("bytelevel-bpe", 700),
                                     root / "bl", show_progress=False),
        "bytelevel-small": train_tokenizer(corpus, TokenizerTrainingSpec("bytelevel-bpe", 300),
                                           root / "bls", show_progress=False),
        "spm": train_tokenizer(corpus, TokenizerTrainingSpec("spm-bpe", 700), root / "spm", show_progress=False),
        "wordpiece": train_tokenizer(corpus, TokenizerTrainingSpec("wordpiece", 700), root / "wp", show_progress=False),
    }


def _chunk_bytes(ids, chunks, texts, count):
    spelled = [b"" for _ in range(count)]
    for token_id, chunk in zip(ids, chunks):
        if chunk >= 0:
            spelled[chunk] += texts[token_id]
    return spelled


@pytest.mark.parametrize("teacher_kind,student_kind", [
    ("bytelevel-small", "bytelevel"), ("bytelevel", "spm"), ("spm", "bytelevel"), ("bytelevel", "bytelevel")])
@pytest.mark.parametrize("text", TEXTS)
def test_chunks_spell_the_same_bytes_on_both_sides_and_are_shortest(tokenizers, teacher_kind, student_kind, text):
    teacher, student = tokenizers[teacher_kind], tokenizers[student_kind]
    t_ids = teacher(text, add_special_tokens=False)["input_ids"]
    s_ids = student(text, add_special_tokens=False)["input_ids"]
    t_texts, s_texts = token_texts(teacher), token_texts(student)
    alignment = align_chunks(text, t_ids, s_ids, t_texts, s_texts)
    assert alignment.chunks >= 3
    t_chunks = _chunk_bytes(t_ids, alignment.teacher, t_texts, alignment.chunks)
    s_chunks = _chunk_bytes(s_ids, alignment.student, s_texts, alignment.chunks)
    kept = [i for i in range(alignment.chunks) if t_chunks[i] or s_chunks[i]]
    assert kept, "no chunk was kept"
    for i in kept:
        # the sentencepiece dummy prefix may add a space to the first kept chunk of one side only
        assert t_chunks[i].lstrip(b" ") == s_chunks[i].lstrip(b" "), (i, t_chunks[i], s_chunks[i])
        assert t_chunks[i] and s_chunks[i]
    # shortest: inside a chunk, the two sides never both end a token at the same byte
    for i in kept:
        t_ends = np.cumsum([len(t_texts[t]) for t, c in zip(t_ids, alignment.teacher) if c == i])[:-1]
        s_ends = np.cumsum([len(s_texts[s]) for s, c in zip(s_ids, alignment.student) if c == i])[:-1]
        offset = len(t_chunks[i]) - len(s_chunks[i])
        assert not set(t_ends.tolist()) & {e + offset for e in s_ends.tolist()}
    # identical tokenizers: every token is its own chunk (but the first)
    if teacher_kind == student_kind:
        assert list(alignment.teacher) == list(alignment.student)
        assert sorted(set(alignment.teacher) - {-1}) == list(range(1, len(t_ids)))


def test_byte_fallback_pieces_count_one_byte_and_chunks_rebuild_the_text(tokenizers):
    """Sentencepiece spells an unseen character with byte-fallback pieces (``<0xE6>``), one byte each; byte-level
    BPE with its own byte tokens. The chunks of both sides, joined, are the text after the first chunk."""
    text = "Il 日本 è lontano"
    teacher, student = tokenizers["spm"], tokenizers["bytelevel"]
    t_ids = teacher(text, add_special_tokens=False)["input_ids"]
    s_ids = student(text, add_special_tokens=False)["input_ids"]
    t_texts, s_texts = token_texts(teacher), token_texts(student)
    pieces = teacher.convert_ids_to_tokens(t_ids)
    fallback = [t for t, piece in zip(t_ids, pieces) if piece.startswith("<0x")]
    assert len(fallback) == 6, pieces  # the test needs the two characters as byte-fallback pieces
    assert all(len(t_texts[t]) == 1 for t in fallback)
    alignment = align_chunks(text, t_ids, s_ids, t_texts, s_texts)
    t_joined = b"".join(_chunk_bytes(t_ids, alignment.teacher, t_texts, alignment.chunks))
    s_joined = b"".join(_chunk_bytes(s_ids, alignment.student, s_texts, alignment.chunks))
    assert t_joined == s_joined
    assert text.encode().endswith(t_joined) and "日本 è lontano".encode() in t_joined


def test_metaspace_and_bytelevel_spellings_of_a_word_start_agree(tokenizers):
    """``▁casa`` (sentencepiece) and ``Ġcasa`` (byte-level) are both b" casa"."""
    spm, bytelevel = tokenizers["spm"], tokenizers["bytelevel"]
    spm_ids = spm(" casa", add_special_tokens=False)["input_ids"]
    bl_ids = bytelevel(" casa", add_special_tokens=False)["input_ids"]
    assert b"".join(token_texts(spm)[i] for i in spm_ids).lstrip(b" ") == b"casa"
    assert b"".join(token_texts(bytelevel)[i] for i in bl_ids) == b" casa"


def test_a_token_that_straddles_a_boundary_merges_the_chunks_it_touches():
    """Teacher ``x| ab|c| d`` and student ``x| a|bc| d``: `` ab`` ends where the student is inside ``bc``, so
    `` abc`` is one chunk on both sides; ``x`` holds position 0 and is left out."""
    texts = [b"x", b" ab", b"c", b" d", b" a", b"bc"]
    alignment = align_chunks("x abc d", [0, 1, 2, 3], [0, 4, 5, 3], texts, texts)
    assert alignment.teacher.tolist() == [-1, 1, 1, 2]
    assert alignment.student.tolist() == [-1, 1, 1, 2]


def test_special_tokens_and_unspelled_text_belong_to_no_chunk():
    texts = [b"", b"a", b" b", b" c", b"?"]  # 0: a special token (no bytes); 4: an unknown token
    alignment = align_chunks("a b c", [0, 1, 2, 3], [1, 2, 3], texts, texts)
    assert alignment.teacher.tolist() == [-1, -1, 1, 2]  # the bos is no chunk; "a" holds position 0 on the student
    assert alignment.student.tolist() == [-1, 1, 2]
    # the student stops spelling the text at the unknown token: nothing after it is matched
    cut = align_chunks("a b c", [1, 2, 3], [1, 2, 4], texts, texts)
    assert cut.teacher.tolist() == [-1, 1, -1] and cut.student.tolist() == [-1, 1, -1]


def _tensors(*rows):
    return torch.tensor([rows], dtype=torch.float32)


def test_planted_student_with_the_teachers_chunk_probabilities_has_zero_loss_with_another_tokenizer():
    """Teacher ``x| a|b| c|d``, student ``x| ab| cd``: the student's probability of `` ab`` is the product of the
    teacher's for `` a`` and ``b``, and so on; with equal word-start probabilities at group ends the loss is 0."""
    texts = [b"x", b" a", b"b", b" c", b"d", b" ab", b" cd"]
    alignment = align_chunks("x ab cd", [0, 1, 2, 3, 4], [0, 5, 6], texts, texts)
    t_logp = torch.tensor([[0.0, math.log(0.5), math.log(0.8), math.log(0.3), math.log(0.9)]])
    s_logp = torch.tensor([[0.0, math.log(0.5 * 0.8), math.log(0.3 * 0.9)]], requires_grad=True)
    t_word = torch.log(torch.tensor([[0.9, 0.05, 0.6, 0.02, 0.7]]))  # after "b" and after "d": a word may start
    s_word = torch.log(torch.tensor([[0.9, 0.6, 0.7]]))
    result = alm_loss(AlmSide(t_logp, t_word, pad_alignments([alignment.teacher], 5)),
                      AlmSide(s_logp, s_word, pad_alignments([alignment.student], 3)))
    assert int(result.groups) == 2
    assert abs(float(result.loss.detach())) < 1e-7
    result.loss.backward()
    assert s_logp.grad.abs().max() < 1e-6


def test_a_student_that_differs_on_one_chunk_gets_loss_and_gradient_only_there():
    texts = [b"x", b" a", b"b", b" c", b"d", b" ab", b" cd"]
    alignment = align_chunks("x ab cd", [0, 1, 2, 3, 4], [0, 5, 6], texts, texts)
    t_logp = torch.tensor([[0.0, math.log(0.5), math.log(0.8), math.log(0.3), math.log(0.9)]])
    s_logp = torch.tensor([[0.0, math.log(0.5 * 0.8), math.log(0.1)]], requires_grad=True)  # " cd" differs
    result = alm_loss(AlmSide(t_logp, None, pad_alignments([alignment.teacher], 5)),
                      AlmSide(s_logp, None, pad_alignments([alignment.student], 3)), AlmSettings(threshold=None))
    assert float(result.loss.detach()) > 1e-4
    result.loss.backward()
    assert s_logp.grad[0, 1].abs() < 1e-6 and s_logp.grad[0, 0] == 0  # float noise at most
    assert s_logp.grad[0, 2] < -1e-3  # the student must raise the chunk's probability


def test_groups_merge_chunks_until_the_teacher_expects_a_new_word():
    """Chunks ``a``, ``b`` end where the teacher gives a word start 0.05 < 0.1: they merge with the next chunk."""
    texts = [b"x", b" a", b"b", b"c", b" d"]
    ids = [0, 1, 2, 3, 4]
    alignment = align_chunks("x abc d", ids, ids, texts, texts)
    logp = torch.log(torch.tensor([[1.0, 0.5, 0.5, 0.5, 0.5]]))
    word = torch.log(torch.tensor([[0.9, 0.05, 0.05, 0.5, 0.5]]))
    chunks = pad_alignments([alignment.teacher], 5)
    result = alm_loss(AlmSide(logp, word, chunks), AlmSide(logp.clone(), word.clone(), chunks))
    assert int(result.groups) == 2  # " abc" and " d"
    expected_first = 3 * math.log(0.5) + math.log(0.5)  # three tokens, then a word start after "c"
    assert result.teacher_logp[0].item() == pytest.approx(expected_first, abs=1e-6)


def test_binary_kl_is_zero_only_on_the_diagonal_and_stable_near_one():
    log_a = torch.tensor([-1e-7, -0.5, -20.0])
    assert torch.allclose(binary_kl(log_a, log_a), torch.zeros(3), atol=1e-7)
    assert (binary_kl(log_a, log_a - 0.1) > 0).all()
    assert torch.isfinite(binary_kl(torch.tensor([-1e-9]), torch.tensor([-1e-6]))).all()


def _tiny_lm(vocab: int, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, tie_word_embeddings=False)
    return LlamaForCausalLM(config)


def _batch(tokenizer, texts):
    rows = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
    length = max(map(len, rows))
    ids = torch.tensor([row + [0] * (length - len(row)) for row in rows])
    mask = torch.tensor([[1] * len(row) + [0] * (length - len(row)) for row in rows])
    return rows, ids, mask


def _alm_between(teacher, teacher_tok, student, student_tok, texts):
    t_rows, t_ids, t_mask = _batch(teacher_tok, texts)
    s_rows, s_ids, s_mask = _batch(student_tok, texts)
    t_texts, s_texts = token_texts(teacher_tok), token_texts(student_tok)
    alignments = [align_chunks(text, t, s, t_texts, s_texts) for text, t, s in zip(texts, t_rows, s_rows)]
    with torch.no_grad():
        t_logp, t_word = sequence_scores(teacher, t_ids, t_mask, word_start_mask(teacher_tok), slab=5)
    s_logp, s_word = sequence_scores(student, s_ids, s_mask, word_start_mask(student_tok), slab=5)
    return alm_loss(AlmSide(t_logp, t_word, pad_alignments([a.teacher for a in alignments], t_ids.shape[1])),
                    AlmSide(s_logp, s_word, pad_alignments([a.student for a in alignments], s_ids.shape[1])))


def test_identical_tokenizers_and_weights_give_zero_loss_and_zero_gradient(tokenizers):
    tokenizer = tokenizers["bytelevel"]
    teacher = _tiny_lm(len(tokenizer)).eval()
    student = copy.deepcopy(teacher)
    result = _alm_between(teacher, tokenizer, student, tokenizer, TEXTS)
    assert int(result.groups) > 10
    assert abs(float(result.loss.detach())) < 1e-6
    result.loss.backward()
    largest = max(p.grad.abs().max() for p in student.parameters() if p.grad is not None)
    assert largest < 1e-6


def test_a_different_student_gets_a_positive_loss_and_a_gradient(tokenizers):
    teacher = _tiny_lm(len(tokenizers["bytelevel"]), seed=0).eval()
    student = _tiny_lm(len(tokenizers["spm"]), seed=1)
    result = _alm_between(teacher, tokenizers["bytelevel"], student, tokenizers["spm"], TEXTS)
    assert float(result.loss.detach()) > 0
    result.loss.backward()
    assert student.get_input_embeddings().weight.grad.abs().sum() > 0
    assert student.lm_head.weight.grad.abs().sum() > 0
