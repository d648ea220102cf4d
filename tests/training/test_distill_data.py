"""The teacher's view of packed student rows: the same text, documents ending together, chunks that spell the
same bytes on both sides."""

from __future__ import annotations

import pytest
import torch

from vocadapt.components.training.alm import token_texts
from vocadapt.components.training.data import LaptData, PackedMixture
from vocadapt.components.training.distill_data import TeacherView


@pytest.fixture(scope="module")
def pair(tmp_path_factory, fixture_corpora):
    """A byte-level teacher (300 tokens, so it splits words finely) and a sentencepiece student (700)."""
    from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, train_tokenizer

    root = tmp_path_factory.mktemp("distill-data")
    corpus = [fixture_corpora["it.train"]]
    teacher = train_tokenizer(corpus, TokenizerTrainingSpec("bytelevel-bpe", 300),
                              root / "teacher", show_progress=False)
    student = train_tokenizer(corpus, TokenizerTrainingSpec("spm-bpe", 700), root / "student", show_progress=False)
    return teacher, student


@pytest.fixture(scope="module")
def student_batch(pair, fixture_corpora):
    _, student = pair
    documents = fixture_corpora["it.validation"].read_text(encoding="utf-8").splitlines()[:40]
    mixture = PackedMixture(LaptData({"target": documents}), student, mixing={"target": 1.0}, sequence_length=48)
    return mixture.next_batch(6)


def _spelled(ids, chunks, texts, chunk):
    return b"".join(texts[i] for i, c in zip(ids, chunks) if c == chunk)


def test_every_chunk_spells_the_same_bytes_in_teacher_and_student_rows(pair, student_batch):
    teacher, student = pair
    view = TeacherView(teacher, student)
    batch = view(student_batch.input_ids)
    t_texts, s_texts = token_texts(teacher), token_texts(student)
    chunks_seen = 0
    for row in range(student_batch.input_ids.shape[0]):
        t_ids, s_ids = batch.input_ids[row].tolist(), student_batch.input_ids[row].tolist()
        t_chunks, s_chunks = batch.chunks[row].tolist(), batch.student_chunks[row].tolist()
        for chunk in sorted(set(s_chunks) - {-1}):
            t_bytes, s_bytes = _spelled(t_ids, t_chunks, t_texts, chunk), _spelled(s_ids, s_chunks, s_texts, chunk)
            assert t_bytes.lstrip(b" ") == s_bytes.lstrip(b" ") and t_bytes, (row, chunk, t_bytes, s_bytes)
            chunks_seen += 1
        assert set(t_chunks) - {-1} == set(s_chunks) - {-1}
    assert chunks_seen > 6 * 20  # most of the text is matched


def test_documents_end_together_and_padding_is_masked(pair, student_batch):
    teacher, student = pair
    batch = TeacherView(teacher, student)(student_batch.input_ids)
    for row in range(student_batch.input_ids.shape[0]):
        student_ends = int((student_batch.input_ids[row] == student.eos_token_id).sum())
        real = batch.input_ids[row][batch.attention_mask[row].bool()]
        assert int((real == teacher.eos_token_id).sum()) == student_ends
    assert (batch.attention_mask.sum(1) > 0).all()
    assert (batch.chunks[batch.attention_mask == 0] == -1).all()
    # the byte-level teacher with 300 tokens needs more tokens for the same text than the student
    assert batch.real_tokens > student_batch.real_tokens


def test_a_teacher_row_cut_short_keeps_only_whole_chunks_on_both_sides(pair, student_batch):
    teacher, student = pair
    full = TeacherView(teacher, student)(student_batch.input_ids[:1])
    cut = TeacherView(teacher, student, max_length=30)(student_batch.input_ids[:1])
    assert cut.input_ids.shape[1] == 30
    kept = set(cut.chunks[0].tolist()) - {-1}
    assert kept and kept == set(cut.student_chunks[0].tolist()) - {-1}
    for chunk in kept:  # a kept chunk has all its tokens, as in the uncut row
        assert int((cut.chunks[0] == chunk).sum()) == int((full.chunks[0] == chunk).sum())
        assert int((cut.student_chunks[0] == chunk).sum()) == int((full.student_chunks[0] == chunk).sum())


def test_the_same_batch_gives_the_same_teacher_view(pair, student_batch):
    teacher, student = pair
    first, second = (TeacherView(teacher, student)(student_batch.input_ids) for _ in range(2))
    assert torch.equal(first.input_ids, second.input_ids) and torch.equal(first.chunks, second.chunks)
