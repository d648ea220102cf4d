"""One gate's verdict, read off a 95% interval: the interval of candidate - source (a paired bootstrap of the items
both models were scored on, else a normal interval from lm-eval's standard errors), and the pass / fail /
undecided rule that ``gates.py``'s module doc states, for a difference from the source model (``difference_gate``)
and for a floor on one model's measure (``floor_gate``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from vocadapt.components.evaluation.bootstrap import Interval, ItemParts, bootstrap_interval, paired_bootstrap
from vocadapt.platform.registry.gate_settings import Margin, PromotionGates


@dataclass
class GateResult:
    """One gate's decision. ``difference``: candidate - source (or the measure itself for a floor on one
    model's measure), with ``interval`` its 95% interval; ``bound``: what the rule compares it with. ``verdict``:
    pass, fail or undecided (the estimate passes inside its noise); only pass counts as passed."""

    gate: str
    measured: float | None
    threshold: float | None
    passed: bool
    detail: str
    reference: float | None = None
    margin: str = ""
    verdict: str = ""
    difference: float | None = None
    interval: Interval | None = None
    bound: float | None = None

    def __post_init__(self) -> None:
        self.verdict = self.verdict or ("pass" if self.passed else "fail")

    def as_dict(self) -> dict[str, Any]:
        return {"gate": self.gate, "measured": self.measured, "reference": self.reference, "margin": self.margin,
                "threshold": self.threshold, "passed": self.passed, "verdict": self.verdict,
                "difference": self.difference, "bound": self.bound,
                "interval": [self.interval.low, self.interval.high] if self.interval else None,
                "detail": self.detail}


Direction = Literal["at_most_plus", "at_most_minus", "at_least_minus"]


def _difference_interval(measured_key: str, reference_key: str, metrics: Mapping[str, float],
                         items: Mapping[str, ItemParts], gates: PromotionGates) -> tuple[Interval | None, str]:
    """The 95% interval of measured - reference: a paired bootstrap of the logged items, else a normal interval
    from lm-eval's standard errors, else None; with how it was made, in words."""
    if measured_key in items and reference_key in items:
        try:
            interval = paired_bootstrap(items[measured_key], items[reference_key],
                                        resamples=gates.bootstrap_resamples, seed=gates.bootstrap_seed)
        except ValueError as error:
            return None, f"no interval ({error})"
        return interval, f"paired bootstrap over {interval.items} items, {interval.resamples} resamples"
    errors = metrics.get(f"{measured_key}_stderr"), metrics.get(f"{reference_key}_stderr")
    if None not in errors:
        spread = 1.96 * (errors[0] ** 2 + errors[1] ** 2) ** 0.5
        difference = metrics[measured_key] - metrics[reference_key]
        return Interval(difference, difference - spread, difference + spread, 0, 0), \
            "normal interval from both standard errors (unpaired)"
    return None, "no per-item parts logged (gates/items.json)"


def _verdict(point_ok: bool, interval_ok: bool | None, gates: PromotionGates, *, lenient: bool = False) -> str:
    """pass / fail / undecided from the point estimate and (when there is one) the interval; see ``gates.py``'s
    module doc."""
    if interval_ok is None:  # no interval
        if not gates.require_intervals:
            return "pass" if point_ok else "fail"
        return "undecided" if point_ok else "fail"
    if interval_ok:
        return "pass"
    return "fail" if lenient or not point_ok else "undecided"


@dataclass(frozen=True)
class GateEvidence:
    """What every gate reads: the run's metrics, the per-item parts their intervals are bootstrapped from, and the
    gates' settings."""

    metrics: Mapping[str, float]
    items: Mapping[str, ItemParts]
    gates: PromotionGates


def difference_gate(gate: str, evidence: GateEvidence, measured_key: str, reference_key: str, margin: Margin,
                    direction: Direction) -> GateResult:
    """Compare ``measured_key`` with ``reference_key`` moved by the margin, on the estimate and its interval.

    With d = measured - reference and a the margin: at_most_plus: d <= a (no worse, lower is better); at_most_minus:
    d <= -a (at least that much lower); at_least_minus: d >= -a (higher is better). The rule on the interval is
    ``gates.py``'s module doc's.
    """
    metrics, items, gates = evidence.metrics, evidence.items, evidence.gates
    measured, reference = metrics.get(measured_key), metrics.get(reference_key)
    if measured_key in items and reference_key in items:  # the items' own sums: the estimate their interval is of
        measured, reference = float(items[measured_key].value()), float(items[reference_key].value())
    if measured is None or reference is None:
        missing = [k for k, v in ((measured_key, measured), (reference_key, reference)) if v is None]
        return GateResult(gate, measured, None, False, f"not measured: metric {missing} missing",
                          reference, margin.describe())
    sign = "+" if direction == "at_most_plus" else "-"
    allowance = margin.allowance(reference)
    bound = allowance if sign == "+" else -allowance
    threshold = reference + bound
    difference = measured - reference
    interval, how = _difference_interval(measured_key, reference_key, metrics, items, gates)
    if direction == "at_least_minus":
        point_ok = difference >= bound
        interval_ok = None if interval is None else interval.high >= bound
        rule = (f"{measured_key} - {reference_key} >= -margin ({bound:+.4g}): the upper end of its 95% interval "
                "must reach it (not worse beyond its noise)")
    else:
        point_ok = difference <= bound
        interval_ok = None if interval is None else interval.high <= bound
        rule = (f"{measured_key} - {reference_key} <= {sign}margin ({bound:+.4g}): the upper end of its 95% "
                "interval must meet it")
    verdict = _verdict(point_ok, interval_ok, gates, lenient=direction == "at_least_minus")
    return GateResult(gate, measured, threshold, verdict == "pass", f"{rule}; {how}", reference, margin.describe(),
                      verdict, difference, interval, bound)


def floor_gate(gate: str, metrics: Mapping[str, float], key: str, margin: Margin,
               items: Mapping[str, ItemParts] | None = None, gates: PromotionGates | None = None) -> GateResult:
    """``key`` >= the margin itself: a measure that is already relative to the source (no source value to move);
    the lower end of its interval must meet it."""
    gates = gates or PromotionGates()
    measured, threshold = metrics.get(key), margin.allowance(0.0)
    if measured is None and key not in (items or {}):
        return GateResult(gate, None, threshold, False, f"not measured: metric ['{key}'] missing", None,
                          margin.describe())
    interval, how = None, "no per-item parts logged (gates/items.json)"
    if items and key in items:
        measured = float(items[key].value())
        interval = bootstrap_interval(items[key], resamples=gates.bootstrap_resamples, seed=gates.bootstrap_seed)
        how = f"bootstrap over {interval.items} items, {interval.resamples} resamples"
    verdict = _verdict(measured >= threshold, None if interval is None else interval.low >= threshold, gates)
    return GateResult(gate, measured, threshold, verdict == "pass",
                      f"{key} >= margin ({threshold:.4g}): the lower end of its 95% interval must meet it; {how}",
                      None, margin.describe(), verdict, measured, interval, threshold)

