"""Promotion gates as pure checks: each gate's rule, missing metrics refuse, and the verdict is all-or-nothing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vocadapt.platform.registry import PromotionGates, evaluate_gates

SOURCE = {"source_model.bpb_target": 2.0, "source_model.bpb_source": 1.0,
          "fertility.source_tokenizer.it.tokens_per_word": 2.0}


def _metrics(target=1.9, source=1.1, fertility=1.5, **extra):
    return {**SOURCE, "bpb_target_after_lapt": target, "bpb_source_after_lapt": source,
            "fertility.target_tokenizer.it.tokens_per_word": fertility, **extra}


def _verdict(metrics, gates=PromotionGates()):
    return {g.gate: g.passed for g in evaluate_gates(metrics, gates, "it")}


def test_a_model_better_than_its_source_passes_every_gate():
    assert all(_verdict(_metrics()).values())


@pytest.mark.parametrize("changes, failing", [
    ({"target": 2.01}, "target bits per byte"),
    ({"source": 1.26}, "source-language bits per byte"),
    ({"fertility": 1.81}, "target fertility"),
])
def test_each_gate_refuses_on_its_own_measure(changes, failing):
    verdict = _verdict(_metrics(**changes))
    assert [gate for gate, passed in verdict.items() if not passed] == [failing]


def test_zero_shot_numbers_are_used_when_there_was_no_lapt():
    metrics = {**SOURCE, "bpb_target_zero_shot": 1.5, "bpb_source_zero_shot": 1.2,
               "fertility.target_tokenizer.it.tokens_per_word": 1.0}
    assert all(_verdict(metrics).values())


def test_missing_metrics_refuse_instead_of_passing():
    results = evaluate_gates({"bpb_target_after_lapt": 1.0}, PromotionGates(), "it")
    assert not any(g.passed for g in results[:3])
    assert all("not measured" in g.detail for g in results[:3])


def test_benchmarks_within_the_margin_pass_and_below_it_fail():
    metrics = _metrics(**{"benchmark.cloze_it.acc_bytes": 0.49, "source_model.benchmark.cloze_it.acc_bytes": 0.50,
                          "benchmark.cloze_en.acc_bytes": 0.40, "source_model.benchmark.cloze_en.acc_bytes": 0.50,
                          "benchmark.cloze_en.acc_bytes_stderr": 0.01})
    verdict = _verdict(metrics)
    assert verdict["benchmark.cloze_it.acc_bytes"] and not verdict["benchmark.cloze_en.acc_bytes"]
    assert "benchmark.cloze_en.acc_bytes_stderr" not in verdict


def test_benchmarks_can_be_required():
    assert _verdict(_metrics())["benchmarks"] is True
    assert _verdict(_metrics(), PromotionGates(require_benchmarks=True))["benchmarks"] is False


@settings(max_examples=40, deadline=None)
@given(target=st.floats(0.5, 4.0), source=st.floats(0.5, 2.0), fertility=st.floats(0.5, 3.0),
       margin=st.floats(0.0, 0.5), reduction=st.floats(0.0, 0.9))
def test_each_gate_passes_exactly_when_its_inequality_holds(target, source, fertility, margin, reduction):
    gates = PromotionGates(target_bpb_margin=margin, source_bpb_margin=margin, min_fertility_reduction=reduction)
    verdict = _verdict(_metrics(target, source, fertility), gates)
    assert verdict["target bits per byte"] == (target <= 2.0 * (1 + margin))
    assert verdict["source-language bits per byte"] == (source <= 1.0 * (1 + margin))
    assert verdict["target fertility"] == (fertility <= 2.0 * (1 - reduction))
