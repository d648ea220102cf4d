"""Aligned units and their deterministic train / validation / test split.

A unit is one paragraph or verse with its text in several languages. Its split is a function of its key alone (a
hash), so the Italian and the English side of a pair always land in the same split, whatever else is in the corpus,
and adding a language or a source never moves an existing unit to another split.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

SPLITS = ("train", "validation", "test")
DEFAULT_FRACTIONS = (0.90, 0.05, 0.05)


@dataclass(frozen=True)
class AlignedUnit:
    """One paragraph or verse: a stable key (``source:locator``), its source name and its text per language."""

    key: str
    source: str
    texts: Mapping[str, str] = field(default_factory=dict)


def split_of(key: str, fractions: Sequence[float] = DEFAULT_FRACTIONS, salt: str = "vocadapt-split-v1") -> str:
    """The split ("train", "validation" or "test") of a unit key: sha256 of salt and key mapped to [0, 1)."""
    if len(fractions) != len(SPLITS) or any(f < 0 for f in fractions) or abs(sum(fractions) - 1.0) > 1e-9:
        raise ValueError(f"split fractions must be three non-negative numbers summing to 1, got {tuple(fractions)}")
    digest = hashlib.sha256(f"{salt}:{key}".encode("utf-8")).digest()
    position = int.from_bytes(digest[:8], "big") / 2**64
    bound = 0.0
    for name, fraction in zip(SPLITS, fractions):
        bound += fraction
        if position < bound:
            return name
    return SPLITS[-1]  # position within float rounding of 1.0


def split_units(
    units: Iterable[AlignedUnit], fractions: Sequence[float] = DEFAULT_FRACTIONS
) -> dict[str, list[AlignedUnit]]:
    """Units grouped by split, each group sorted by key (so the files written from it are deterministic)."""
    grouped: dict[str, list[AlignedUnit]] = {name: [] for name in SPLITS}
    for unit in units:
        grouped[split_of(unit.key, fractions)].append(unit)
    for group in grouped.values():
        group.sort(key=lambda unit: unit.key)
    return grouped


def drop_duplicate_texts(units: Iterable[AlignedUnit], languages: Sequence[str]) -> list[AlignedUnit]:
    """Units in key order, without those whose text in any of ``languages`` already appeared in an earlier unit.

    The help pages repeat paragraphs ("Choose Tools - Options") on many pages; without this a test paragraph would
    also be in the training data.
    """
    seen: dict[str, set[str]] = {language: set() for language in languages}
    kept = []
    for unit in sorted(units, key=lambda unit: unit.key):
        if any(unit.texts[language] in seen[language] for language in languages):
            continue
        for language in languages:
            seen[language].add(unit.texts[language])
        kept.append(unit)
    return kept
