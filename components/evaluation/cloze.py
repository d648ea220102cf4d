"""Cloze items from held-out text: the true continuation of a paragraph or verse among distractors.

Each eligible document (at least ``min_words`` words) is cut at the word boundary nearest its middle; the second
half is the true continuation, and ``n_choices - 1`` distractors are second halves of other documents of the same
split with a similar length (within a factor of two in words where possible, so the length alone does not give the
answer away). Scored by log-likelihood with byte-length normalisation (lm-eval's ``acc_bytes``, not ``acc_norm``,
which divides by characters).
Everything is decided by a seeded ``random.Random``: same documents and seed, same items.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ClozeItem:
    """One multiple-choice item: ``choices[label]`` is the true continuation of ``context``."""

    key: str
    context: str
    choices: list[str]
    label: int

    def as_dict(self) -> dict:
        return asdict(self)


def split_document(document: str) -> tuple[str, str]:
    """(first half, second half) of a document, cut at the word boundary nearest the middle; spaces dropped."""
    words = document.split()
    if len(words) < 2:
        raise ValueError(f"a document needs at least two words to be cut, got {document!r}")
    cut = len(words) // 2
    return " ".join(words[:cut]), " ".join(words[cut:])


def build_cloze_items(
    documents: Sequence[str],
    *,
    n_items: int,
    n_choices: int = 4,
    min_words: int = 8,
    seed: int = 0,
    key_prefix: str = "doc",
) -> list[ClozeItem]:
    """Up to ``n_items`` cloze items from ``documents`` (fewer when fewer documents are eligible)."""
    if n_choices < 2:
        raise ValueError(f"n_choices must be at least 2, got {n_choices}")
    eligible = [(index, split_document(doc)) for index, doc in enumerate(documents) if len(doc.split()) >= min_words]
    if len(eligible) < n_choices:
        raise ValueError(
            f"only {len(eligible)} documents have {min_words}+ words but {n_choices} choices need as many: "
            "give more held-out documents or lower min_words"
        )
    rng = random.Random(seed)
    chosen = rng.sample(range(len(eligible)), min(n_items, len(eligible)))
    items = []
    for position in sorted(chosen):
        index, (context, truth) = eligible[position]
        distractors = _distractors(eligible, position, truth, n_choices - 1, rng)
        choices = [truth, *distractors]
        rng.shuffle(choices)
        items.append(ClozeItem(f"{key_prefix}:{index}", context, choices, choices.index(truth)))
    return items


def _distractors(eligible, position: int, truth: str, count: int, rng: random.Random) -> list[str]:
    """``count`` second halves of other documents, different from the truth and each other, similar in length."""
    length = len(truth.split())
    others = [second for i, (_, (_, second)) in enumerate(eligible) if i != position and second != truth]
    similar = [text for text in others if length / 2 <= len(text.split()) <= length * 2]
    picked: list[str] = []
    for pool in (similar, others):
        candidates = sorted(set(pool) - set(picked))
        rng.shuffle(candidates)
        picked.extend(candidates[: count - len(picked)])
        if len(picked) == count:
            return picked
    raise ValueError(f"not enough distinct continuations for {count} distractors: give more held-out documents")
