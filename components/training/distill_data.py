"""The teacher's view of a packed student batch, for distillation across tokenizers.

LAPT packs the student's tokens (the adapted tokenizer) into sequences of exactly ``sequence_length``, documents
back to back with an end-of-sequence token between them. The teacher (the source model) must read the same text
with its own tokenizer. A packed sequence is cut at its end-of-sequence tokens into runs of text; each run is
exactly the bytes its student tokens spell, so the teacher tokenizes that text, and the two tokenizations are
aligned run by run into ALM's chunks (``alm.align_chunks``). The teacher's sequence ends each document where the
student's does, with its own end-of-sequence token. Packing stays exact: the student's batch is unchanged, and
the teacher's rows are padded to the longest one in the batch (its attention mask marks the padding).

A run may begin or end inside a multi-byte character (packing cuts by tokens, not characters): the teacher gets the
run's text without the partial character, and alignment stops where the two spellings part, so no chunk spans it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from vocadapt.components.training.alm import align_chunks, pad_alignments, token_texts


@dataclass
class TeacherBatch:
    input_ids: torch.Tensor  # [batch, teacher length] long, padded with the teacher's pad (or eos) id
    attention_mask: torch.Tensor  # [batch, teacher length], 0 on padding
    chunks: torch.Tensor  # [batch, teacher length] chunk id per teacher token, -1 for none
    student_chunks: torch.Tensor  # [batch, student length] chunk id per student token, -1 for none

    @property
    def real_tokens(self) -> int:
        return int(self.attention_mask.sum())


class TeacherView:
    """Turns student rows into the teacher's rows and the chunk alignment between them."""

    def __init__(self, teacher_tokenizer, student_tokenizer, *, max_length: int | None = None) -> None:
        """max_length: the longest teacher row (tokens past it belong to no chunk); None: no limit."""
        if teacher_tokenizer.eos_token_id is None:
            raise ValueError("the teacher's tokenizer has no end-of-sequence token to mark document boundaries")
        self.teacher, self.student, self.max_length = teacher_tokenizer, student_tokenizer, max_length
        self.teacher_texts, self.student_texts = token_texts(teacher_tokenizer), token_texts(student_tokenizer)
        self.student_eos = student_tokenizer.eos_token_id
        self.teacher_eos = teacher_tokenizer.eos_token_id
        self.teacher_pad = teacher_tokenizer.pad_token_id if teacher_tokenizer.pad_token_id is not None \
            else self.teacher_eos

    def __call__(self, student_ids: torch.Tensor) -> TeacherBatch:
        """student_ids: [batch, student length] packed rows."""
        rows, teacher_chunks, student_chunks = [], [], []
        for row in student_ids.tolist():
            teacher_row, t_chunks, s_chunks = self._row(row)
            if self.max_length is not None and len(teacher_row) > self.max_length:
                teacher_row = teacher_row[: self.max_length]
                t_chunks, s_chunks = _cut(t_chunks[: self.max_length], s_chunks)
            rows.append(teacher_row)
            teacher_chunks.append(t_chunks)
            student_chunks.append(s_chunks)
        length = max(len(row) for row in rows)
        input_ids = torch.full((len(rows), length), self.teacher_pad, dtype=torch.long)
        attention_mask = torch.zeros((len(rows), length), dtype=torch.long)
        for index, row in enumerate(rows):
            input_ids[index, : len(row)] = torch.as_tensor(row, dtype=torch.long)
            attention_mask[index, : len(row)] = 1
        return TeacherBatch(input_ids, attention_mask, pad_alignments(teacher_chunks, length),
                            pad_alignments(student_chunks, student_ids.shape[1]))

    def _row(self, student_row: list[int]) -> tuple[list[int], np.ndarray, np.ndarray]:
        teacher_row: list[int] = []
        teacher_chunks: list[np.ndarray] = []
        student_chunks = np.full(len(student_row), -1, dtype=np.int64)
        next_chunk, start = 0, 0
        while start < len(student_row):
            end = start
            while end < len(student_row) and student_row[end] != self.student_eos:
                end += 1
            if end > start:
                run = student_row[start:end]
                raw = b"".join(self.student_texts[i] if i < len(self.student_texts) else b"" for i in run)
                text = raw.decode("utf-8", errors="ignore")
                ids = self.teacher(text, add_special_tokens=False)["input_ids"] if text else []
                alignment = align_chunks(raw, ids, run, self.teacher_texts, self.student_texts)
                teacher_row.extend(ids)
                teacher_chunks.append(np.where(alignment.teacher >= 0, alignment.teacher + next_chunk, -1))
                student_chunks[start:end] = np.where(alignment.student >= 0, alignment.student + next_chunk, -1)
                next_chunk += alignment.chunks
            if end < len(student_row):  # an end of document: the teacher's ends there too
                teacher_row.append(self.teacher_eos)
                teacher_chunks.append(np.array([-1]))
            start = end + 1
        chunks = np.concatenate(teacher_chunks) if teacher_chunks else np.zeros(0, dtype=np.int64)
        return teacher_row, chunks, student_chunks


def _cut(teacher_chunks: np.ndarray, student_chunks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """After the teacher's row was cut: the chunks it still holds whole, on both sides. The last chunk with teacher
    tokens left may have lost some of them to the cut, so it goes too."""
    kept = teacher_chunks[teacher_chunks >= 0]
    last = int(kept.max()) if kept.size else 0
    return (np.where(teacher_chunks < last, teacher_chunks, -1),
            np.where((student_chunks >= 0) & (student_chunks < last), student_chunks, -1))
