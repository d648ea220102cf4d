"""The default gates: bits per byte out of domain, and every decision read off a 95% interval (platform/registry/gates.py)."""

from __future__ import annotations

import numpy as np
import pytest

from vocadapt.components.evaluation.bootstrap import ItemParts, ratio_parts
from vocadapt.components.evaluation.text_scores import chrf_statistics
from vocadapt.platform.registry.gates import PromotionGates, evaluate_gates

IDS = tuple(f"doc{index}" for index in range(60))


def _documents(rate: float, noise: float, seed: int) -> ItemParts:
    """60 out-of-domain documents' bits and bytes around ``rate`` bits per byte, each model's own noise."""
    rng = np.random.default_rng(seed)
    sizes = np.random.default_rng(99).integers(80, 300, len(IDS)).astype(float)
    return ratio_parts((rate + rng.normal(0, noise, len(IDS))) * sizes, sizes, IDS)


def _world(candidate: ItemParts, source: ItemParts, **metrics: float):
    items = {"bpb_ood_target": candidate, "source_model.bpb_ood_target": source}
    values = {key: float(parts.value()) for key, parts in items.items()}
    # the held-out split flatters: far better than the source there, whatever happens out of domain
    return {**values, "bpb_target_after_lapt": 1.0, "source_model.bpb_target": 3.0, **metrics}, items


def _gate(metrics, items, gates=PromotionGates(), name="target bits per byte"):
    return next(g for g in evaluate_gates(metrics, gates, "it", items) if g.gate == name)


def test_the_default_target_gate_reads_out_of_domain_bits_per_byte_not_the_held_out_split():
    metrics, items = _world(_documents(2.70, 0.05, 1), _documents(2.67, 0.05, 2))
    gate = _gate(metrics, items)
    assert gate.measured == pytest.approx(metrics["bpb_ood_target"]) and "bpb_ood_target" in gate.detail
    assert gate.verdict == "fail"  # 2.70 out of domain against 2.67, though 1.0 against 3.0 held out
    held_out = _gate(metrics, items, PromotionGates(bpb_text="held_out", require_intervals=False))
    assert held_out.passed and held_out.measured == 1.0 and "bpb_target_after_lapt" in held_out.detail


def test_clearly_better_passes_with_the_interval_below_the_bound():
    metrics, items = _world(_documents(2.50, 0.05, 1), _documents(2.67, 0.05, 2))
    gate = _gate(metrics, items)
    assert gate.verdict == "pass" and gate.passed
    assert gate.interval.low <= gate.difference <= gate.interval.high < gate.bound == 0.0


def test_a_gate_passing_on_its_estimate_inside_its_noise_is_undecided_and_not_passed():
    """0.01 bits per byte better on the estimate, with per-document noise of 0.3: the interval reaches above 0."""
    candidate, source = _documents(2.66, 0.3, 1), _documents(2.67, 0.3, 2)
    metrics, items = _world(candidate, source)
    assert metrics["bpb_ood_target"] < metrics["source_model.bpb_ood_target"]  # passes on its point estimate
    gate = _gate(metrics, items)
    assert gate.verdict == "undecided" and not gate.passed
    assert gate.interval.low < 0 < gate.interval.high
    assert _gate(metrics, {}, PromotionGates(require_intervals=False)).passed  # the point estimate alone passes


def test_an_old_run_without_out_of_domain_metrics_is_refused_with_the_way_to_judge_it():
    metrics = {"bpb_target_after_lapt": 1.0, "source_model.bpb_target": 3.0}
    gate = _gate(metrics, {})
    assert not gate.passed and "bpb_ood_target" in gate.detail and "bpb_text: held_out" in gate.detail


def test_without_items_a_passing_estimate_is_undecided_unless_intervals_are_not_required():
    metrics = {"bpb_ood_target": 2.0, "source_model.bpb_ood_target": 2.5}
    assert _gate(metrics, {}).verdict == "undecided"
    assert _gate(metrics, {}, PromotionGates(require_intervals=False)).verdict == "pass"
    assert _gate({"bpb_ood_target": 3.0, "source_model.bpb_ood_target": 2.5}, {}).verdict == "fail"


def test_unpaired_items_give_no_interval_and_say_why():
    metrics, items = _world(_documents(2.50, 0.05, 1), _documents(2.67, 0.05, 2))
    items["bpb_ood_target"] = ratio_parts(items["bpb_ood_target"].parts[:, 0], items["bpb_ood_target"].parts[:, 1],
                                          tuple(f"other{index}" for index in range(60)))
    gate = _gate(metrics, items)
    assert gate.interval is None and gate.verdict == "undecided" and "ids differ" in gate.detail


CHRF = "benchmark.side_by_side_translation_en_it.chrf"
REFERENCES = [f"la frase numero {index} parla del tempo e della città" for index in range(24)]


def _chrf_items(wrong_every: int) -> ItemParts:
    hypotheses = [("una cosa del tutto diversa" if index % wrong_every == 0 else reference)
                  for index, reference in enumerate(REFERENCES)]
    return ItemParts("chrf", chrf_statistics(hypotheses, REFERENCES), tuple(f"p{i}" for i in range(24)))


def test_chrf_passes_unless_worse_beyond_its_interval():
    """On 24 items a candidate a few chrF points below the source (beyond the 1-point margin on its estimate) is
    not worse beyond its interval: it passes, as the rule says; much worse fails."""
    source = _chrf_items(12)
    for wrong_every, verdict in ((8, "pass"), (2, "fail")):
        candidate = _chrf_items(wrong_every)
        items = {CHRF: candidate, f"source_model.{CHRF}": source}
        metrics = {key: float(parts.value()) for key, parts in items.items()}
        gate = _gate(metrics, items, name=CHRF)
        assert gate.verdict == verdict, (gate.difference, gate.interval)
        assert gate.interval.low <= gate.difference <= gate.interval.high
    assert gate.interval.high < -1.0 and "not worse beyond its noise" in gate.detail


def test_standard_errors_give_a_normal_interval_when_no_items_were_logged():
    key = "benchmark.cloze_it.acc"
    metrics = {key: 0.47, f"source_model.{key}": 0.50, f"{key}_stderr": 0.01, f"source_model.{key}_stderr": 0.01}
    gate = _gate(metrics, {}, name=key)
    assert gate.interval.high == pytest.approx(-0.03 + 1.96 * 2 ** 0.5 * 0.01)
    assert gate.verdict == "pass" and "standard errors" in gate.detail  # -0.002 reaches -0.02


def test_the_same_seed_gives_the_same_decision_and_interval():
    metrics, items = _world(_documents(2.66, 0.3, 1), _documents(2.67, 0.3, 2))
    first, again = _gate(metrics, items), _gate(metrics, items)
    assert first.interval == again.interval
    other = _gate(metrics, items, PromotionGates(bootstrap_seed=1))
    assert other.interval != first.interval
