"""Which method `adapt` registers: the one best on the text the default promotion gate reads (out of domain), not on
the held-out split of the training corpora, which flatters a method fitted to their domain."""

from __future__ import annotations

from pathlib import Path

import pytest

from vocadapt.pipelines.adapt_outcomes import MethodOutcome


def outcome(method: str, held_out: float, out_of_domain: dict[str, float] | None = None) -> MethodOutcome:
    return MethodOutcome(method, f"run-{method}", Path(method),
                         bits_per_byte={"target_zero_shot": 3.1, "target_after_lapt": held_out,
                                        "source_after_lapt": 1.4},
                         side_by_side={"bpb_ood_source": 1.3, "benchmark.side_by_side_cloze_it.acc_bytes": 0.4,
                                       **(out_of_domain or {})})


def test_the_best_method_is_the_best_out_of_domain_where_that_text_was_scored():
    # the head fit's pattern measured on an H200: better held out, worse out of domain
    head_fit = outcome("head-fit", held_out=2.749, out_of_domain={"bpb_ood_target": 3.092})
    distilled = outcome("distilled", held_out=2.880, out_of_domain={"bpb_ood_target": 2.716})
    assert min([head_fit, distilled], key=MethodOutcome.score).method == "distilled"
    assert head_fit.held_out_target_bpb() == pytest.approx(2.749)


def test_several_target_languages_rank_on_the_mean_of_their_out_of_domain_text():
    scored = outcome("fvt", held_out=2.0, out_of_domain={"bpb_ood_target": 2.7, "bpb_ood_target_de": 2.9,
                                                         "bpb_ood_target_ru": float("nan")})
    assert scored.out_of_domain_target_bpb() == pytest.approx(2.8)  # a language without a finite score is left out
    assert scored.score() == pytest.approx(2.8)


def test_without_out_of_domain_scores_the_held_out_text_ranks():
    held_out_only = outcome("fvt", held_out=2.6)
    assert held_out_only.out_of_domain_target_bpb() is None
    assert held_out_only.score() == pytest.approx(2.6)
    before_lapt = MethodOutcome("mean", "run", Path("mean"), bits_per_byte={"target_zero_shot": 3.1})
    assert before_lapt.score() == pytest.approx(3.1)
