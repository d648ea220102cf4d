"""Paired bootstrap intervals for the promotion gates: how far a measured difference could move on other items.

A gate compares a candidate with its source model on the same documents or items. Each metric is kept as per-item
*parts* whose sums make the corpus-level number, so a resample recomputes the number the way the metric itself does:

- ``ratio``: sum of numerators / sum of denominators (bits per byte: bits / UTF-8 bytes per document; tokens per
  generated character: tokens / characters per item). A resample's bits per byte is the sum of bits over the
  resampled documents divided by the sum of their bytes, not a mean of per-document ratios.
- ``saving``: 1 - sum of numerators / sum of denominators (the same-text token saving: 1 - tokens generated /
  tokens the source tokenizer needs for the same text);
- ``mean``: the mean of per-item scores (cloze accuracy: 1 or 0 per item).
- ``chrf``: sacrebleu's sufficient statistics per sentence; the corpus chrF of a resample is computed from their
  sum (``sacrebleu.metrics.CHRF._compute_score_from_stats``), exactly as sacrebleu's own paired bootstrap does.

*Paired*: one set of resampled indices is drawn per resample and applied to the candidate and the source alike, so
item difficulty cancels in the difference. Indices come from ``numpy.random.default_rng(seed).choice(n, (B, n))``,
the draw sacrebleu's ``_bootstrap_resample`` makes, and the 95% interval takes the sorted resamples at positions
``B // 40`` and ``B - B // 40 - 1`` like sacrebleu's ``estimate_ci``: with the same seed both give the same chrF
interval (``tests/evaluation/test_bootstrap.py`` checks it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

Kind = Literal["ratio", "saving", "mean", "chrf"]
KINDS = ("ratio", "saving", "mean", "chrf")
DEFAULT_RESAMPLES = 1000


@dataclass(frozen=True)
class ItemParts:
    """One model's per-item parts of one metric. ``parts``: shape (items, k): k = 2 for ``ratio`` (numerator,
    denominator), 1 for ``mean``, sacrebleu's statistics for ``chrf``. ``ids`` name the items, for pairing."""

    kind: Kind
    parts: np.ndarray
    ids: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown item kind {self.kind!r}; use one of {KINDS}")
        parts = np.asarray(self.parts, dtype=np.float64)
        if parts.ndim == 1:
            parts = parts[:, None]
        if parts.ndim != 2 or len(parts) == 0:
            raise ValueError(f"item parts must be a non-empty (items, k) array, got shape {parts.shape}")
        if self.kind in ("ratio", "saving") and parts.shape[1] != 2:
            raise ValueError(f"ratio items need (numerator, denominator) per item, got {parts.shape[1]} columns")
        if self.ids and len(self.ids) != len(parts):
            raise ValueError(f"{len(self.ids)} ids for {len(parts)} items")
        object.__setattr__(self, "parts", parts)

    def __len__(self) -> int:
        return len(self.parts)

    def value(self, weights: np.ndarray | None = None) -> np.ndarray | float:
        """The metric on all items (``weights`` None) or on each resample (``weights``: (B, items) counts)."""
        sums = self.parts.sum(axis=0) if weights is None else weights @ self.parts  # (k,) or (B, k)
        n = len(self) if weights is None else weights.sum(axis=1)
        if self.kind == "ratio":
            return sums[..., 0] / sums[..., 1]
        if self.kind == "saving":
            return 1.0 - sums[..., 0] / sums[..., 1]
        if self.kind == "mean":
            return sums[..., 0] / n
        return _chrf_from_sums(np.atleast_2d(sums)) if weights is not None else float(_chrf_from_sums(sums[None])[0])


def _chrf_from_sums(sums: np.ndarray) -> np.ndarray:
    from sacrebleu.metrics import CHRF

    metric = CHRF()
    return np.array([metric._compute_score_from_stats(list(row)).score for row in sums])


@dataclass(frozen=True)
class Interval:
    """A point estimate and its two-sided interval (``confidence``, 0.95 by default), from ``resamples``."""

    estimate: float
    low: float
    high: float
    resamples: int
    items: int
    confidence: float = 0.95

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def as_dict(self) -> dict[str, float | int]:
        return {"estimate": self.estimate, "low": self.low, "high": self.high, "resamples": self.resamples,
                "items": self.items, "confidence": self.confidence}


def resample_weights(items: int, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> np.ndarray:
    """(resamples, items) counts: how often each item is drawn in each resample (sacrebleu's draw, see module)."""
    if items < 1 or resamples < 1:
        raise ValueError(f"need at least one item and one resample, got {items} and {resamples}")
    indices = np.random.default_rng(seed).choice(items, size=(resamples, items), replace=True)
    weights = np.zeros((resamples, items))
    np.add.at(weights, (np.arange(resamples)[:, None], indices), 1.0)
    return weights


def percentile_interval(estimate: float, values: np.ndarray, *, items: int) -> Interval:
    """The 95% interval of sorted ``values`` at sacrebleu's positions (``B // 40``, ``B - B // 40 - 1``)."""
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    lower = len(ordered) // 40
    return Interval(float(estimate), float(ordered[lower]), float(ordered[len(ordered) - lower - 1]),
                    len(ordered), items)


def bootstrap_interval(candidate: ItemParts, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Interval:
    """The 95% interval of one model's metric over resampled items."""
    weights = resample_weights(len(candidate), resamples=resamples, seed=seed)
    return percentile_interval(float(candidate.value()), candidate.value(weights), items=len(candidate))


def paired_bootstrap(candidate: ItemParts, reference: ItemParts, *, resamples: int = DEFAULT_RESAMPLES,
                     seed: int = 0) -> Interval:
    """The 95% interval of candidate - reference, both scored on the same resampled items (see the module doc).

    Raises ValueError when the two were not scored on the same items (different kind, count or ids)."""
    check_paired(candidate, reference)
    weights = resample_weights(len(candidate), resamples=resamples, seed=seed)
    estimate = float(candidate.value()) - float(reference.value())
    return percentile_interval(estimate, candidate.value(weights) - reference.value(weights), items=len(candidate))


def check_paired(candidate: ItemParts, reference: ItemParts) -> None:
    if candidate.kind != reference.kind:
        raise ValueError(f"cannot pair {candidate.kind} items with {reference.kind} items")
    if len(candidate) != len(reference):
        raise ValueError(f"cannot pair {len(candidate)} items with {len(reference)}: score both on the same items")
    if candidate.ids and reference.ids and candidate.ids != reference.ids:
        raise ValueError("the candidate and the source were scored on different items (their ids differ)")


def item_id(text: str) -> str:
    """A short, stable name for an item's text (pairing check; the text itself is not logged)."""
    import hashlib

    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def parts_from_json(entry: dict) -> ItemParts:
    """An ``ItemParts`` from its JSON form ``{"kind", "parts", "ids"}`` (what ``parts_to_json`` writes)."""
    return ItemParts(entry["kind"], np.asarray(entry["parts"], dtype=np.float64), tuple(entry.get("ids", ())))


def parts_to_json(parts: ItemParts) -> dict:
    return {"kind": parts.kind, "parts": parts.parts.tolist(), "ids": list(parts.ids)}


def ratio_parts(numerators: Sequence[float], denominators: Sequence[float], ids: Sequence[str] = (), *,
                kind: Kind = "ratio") -> ItemParts:
    return ItemParts(kind, np.column_stack([numerators, denominators]).astype(np.float64), tuple(ids))
