"""The paired bootstrap behind the promotion gates' intervals (components/evaluation/bootstrap.py)."""

from __future__ import annotations

import numpy as np
import pytest

from vocadapt.components.evaluation.bootstrap import (
    ItemParts, bootstrap_interval, paired_bootstrap, parts_from_json, parts_to_json, ratio_parts, resample_weights,
)
from vocadapt.components.evaluation.text_scores import chrf, chrf_statistics


def _documents(n: int, seed: int, shift: float = 0.0):
    """n documents' (bits, bytes): bits per byte near 2.7 + shift, with document-to-document spread."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(60, 400, n).astype(float)
    rates = 2.7 + shift + rng.normal(0, 0.4, n)
    return rates * sizes, sizes


def test_same_seed_same_interval_and_another_seed_another():
    bits, size = _documents(64, 1)
    other_bits, _ = _documents(64, 2, shift=0.05)
    candidate, source = ratio_parts(bits, size), ratio_parts(other_bits, size)
    first = paired_bootstrap(candidate, source, seed=7)
    assert paired_bootstrap(candidate, source, seed=7) == first
    assert paired_bootstrap(candidate, source, seed=8) != first


def test_a_resample_is_summed_bits_over_summed_bytes():
    bits, size = np.array([10.0, 30.0, 5.0]), np.array([10.0, 10.0, 1.0])
    parts = ratio_parts(bits, size)
    weights = np.array([[2.0, 1.0, 0.0], [0.0, 0.0, 3.0]])
    assert parts.value(weights) == pytest.approx([50.0 / 30.0, 15.0 / 3.0])
    assert parts.value() == pytest.approx(45.0 / 21.0)  # not the mean of 1, 3 and 5


def test_interval_contains_the_estimate_and_shrinks_with_more_items():
    widths = []
    for n in (32, 128, 512):
        bits, size = _documents(n, 3)
        source_bits, _ = _documents(n, 4)
        interval = paired_bootstrap(ratio_parts(bits, size), ratio_parts(source_bits, size), seed=0)
        assert interval.low <= interval.estimate <= interval.high
        widths.append(interval.high - interval.low)
    assert widths[0] > widths[1] > widths[2]


def test_pairing_cancels_shared_item_difficulty():
    """Same documents, candidate = source + a small constant per byte: the paired interval is tight around it
    while each model's own interval is wide."""
    bits, size = _documents(100, 5)
    candidate = ratio_parts(bits + 0.01 * size, size)
    source = ratio_parts(bits, size)
    paired = paired_bootstrap(candidate, source)
    alone = bootstrap_interval(candidate)
    assert paired.estimate == pytest.approx(0.01)
    assert paired.high - paired.low < 1e-9 < alone.high - alone.low


def test_unpaired_items_are_refused():
    bits, size = _documents(10, 6)
    with pytest.raises(ValueError, match="same items"):
        paired_bootstrap(ratio_parts(bits, size), ratio_parts(bits[:9], size[:9]))
    with pytest.raises(ValueError, match="ids differ"):
        paired_bootstrap(ratio_parts(bits, size, [f"a{i}" for i in range(10)]),
                         ratio_parts(bits, size, [f"b{i}" for i in range(10)]))


def test_json_round_trip():
    parts = ItemParts("mean", np.array([1.0, 0.0, 1.0]), ("x", "y", "z"))
    again = parts_from_json(parts_to_json(parts))
    assert again.kind == "mean" and again.ids == parts.ids and np.array_equal(again.parts, parts.parts)
    assert again.value() == pytest.approx(2 / 3)


HYPOTHESES = ["il gatto dorme sul divano", "la casa è grande e bella", "oggi piove molto forte", "mangio una mela",
              "il treno parte alle otto", "leggo un libro nuovo", "la strada è lunga", "il cielo è blu oggi",
              "vado al mare domani", "scrivo una lettera", "il cane abbaia", "la pasta è pronta"]
REFERENCES = ["il gatto dorme sul letto", "la casa è molto grande", "oggi piove forte", "mangio la mela",
              "il treno parte alle nove", "leggo un nuovo libro", "la via è lunga", "oggi il cielo è blu",
              "domani vado al mare", "scrivo una lettera lunga", "il cane abbaia forte", "la pasta è cotta"]


def test_chrf_items_sum_to_sacrebleu_corpus_chrf():
    parts = ItemParts("chrf", np.array(chrf_statistics(HYPOTHESES, REFERENCES)))
    assert parts.value() == pytest.approx(chrf(HYPOTHESES, REFERENCES))


def test_chrf_interval_agrees_with_sacrebleus_bootstrap(monkeypatch):
    """sacrebleu's own bootstrap of a system's chrF (``_bootstrap_resample`` + ``estimate_ci``) with its seed gives
    the same resamples and the same 95% interval as ours with that seed."""
    from sacrebleu.metrics import CHRF
    from sacrebleu.significance import _bootstrap_resample, estimate_ci

    monkeypatch.setenv("SACREBLEU_SEED", "12345")
    statistics = chrf_statistics(HYPOTHESES, REFERENCES)
    _, scores = _bootstrap_resample(statistics, CHRF(), n_samples=200)
    theirs = np.array([score.score for score in scores])
    ours = bootstrap_interval(ItemParts("chrf", np.array(statistics)), resamples=200, seed=12345)
    mean, half_width = estimate_ci(theirs)
    assert ours.half_width == pytest.approx(half_width, abs=1e-4)  # sacrebleu sums float32 statistics
    ordered = np.sort(theirs)
    assert (ours.low, ours.high) == pytest.approx((ordered[5], ordered[-6]), abs=1e-4)


def test_paired_chrf_difference_uses_one_draw_for_both():
    candidate = ItemParts("chrf", np.array(chrf_statistics(HYPOTHESES, REFERENCES)))
    source = ItemParts("chrf", np.array(chrf_statistics(REFERENCES, REFERENCES)))  # a perfect system
    interval = paired_bootstrap(candidate, source, resamples=300, seed=1)
    weights = resample_weights(len(candidate), resamples=300, seed=1)
    differences = np.sort(candidate.value(weights) - source.value(weights))
    assert (interval.low, interval.high) == pytest.approx((differences[7], differences[-8]))
    assert interval.high < 0  # worse than a perfect system on every resample
