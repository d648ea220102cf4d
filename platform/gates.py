"""Promotion gates: what a model version must show, against its source model, before an alias moves to it.

Each gate states its own margin, absolute (in the metric's units) or relative (a fraction of the source model's
value), because the measures do not share a scale: accuracy is 0-1, chrF 0-100, bits per byte about 1-6, tokens per
word about 1-3. Pure checks over logged metrics; ``platform/registry.py`` reads the metrics and moves the alias.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from vocadapt.platform.config_sections import Section


class Margin(Section):
    """A gate's allowance, stated as exactly one of ``absolute`` (in the metric's own units) or ``relative`` (a
    fraction of the source model's value): ``{absolute: 1.0}`` or ``{relative: 0.05}`` in YAML. Gates do not share
    a scale (accuracy is 0-1, chrF 0-100, bits per byte about 1-6), so a bare number is refused."""

    absolute: float | None = Field(
        None, ge=0, description="Allowance in the metric's own units (accuracy points as a fraction, chrF points, "
        "bits per byte, tokens per word)."
    )
    relative: float | None = Field(
        None, ge=0, description="Allowance as a fraction of the source model's value (0.05: 5% of it)."
    )

    @model_validator(mode="before")
    @classmethod
    def _kind_is_stated(cls, data: Any) -> Any:
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            raise ValueError(f"a bare number ({data}) does not say whether the margin is absolute or relative; "
                             f"write {{absolute: {data}}} (metric units) or {{relative: {data}}} (fraction)")
        return data

    @model_validator(mode="after")
    def _exactly_one(self) -> Margin:
        if (self.absolute is None) == (self.relative is None):
            raise ValueError("give exactly one of absolute (metric units) or relative (fraction of the source's value)")
        return self

    def allowance(self, reference: float) -> float:
        """The margin in the metric's units, for a source-model value of ``reference``."""
        return self.absolute if self.absolute is not None else self.relative * abs(reference)

    def describe(self) -> str:
        if self.absolute is not None:
            return f"{self.absolute:g} absolute"
        return f"{self.relative * 100:g}% relative"


def _relative(fraction: float) -> Margin:
    return Margin(relative=fraction)


def _absolute(amount: float) -> Margin:
    return Margin(absolute=amount)


# Margins of the benchmark measures vocadapt logs (platform/evaluation/harness.py): accuracies are fractions in
# [0, 1], sacrebleu's chrF is in [0, 100]. Two accuracy points and one chrF point.
DEFAULT_BENCHMARK_MARGINS = {"acc": 0.02, "acc_norm": 0.02, "acc_bytes": 0.02, "chrf": 1.0}
# The flat keys of the first gate schema, with the per-gate form that replaces each.
_REPLACED_KEYS = {
    "target_bpb_margin": "target_bpb: {relative: X}",
    "source_bpb_margin": "source_bpb: {relative: X}",
    "min_fertility_reduction": "target_fertility_reduction: {relative: X}",
    "benchmark_margin": "benchmarks: {acc_bytes: {absolute: X}, chrf: {absolute: Y}, ...} (one margin per measure)",
}


class PromotionGates(Section):
    """What a model version must show before an alias (``champion``) moves to it. Each gate states its own margin,
    absolute or relative (see ``Margin``); the reference is always the source model's value, logged by the same
    pipeline (``source_model.*``)."""

    target_bpb: Margin = Field(
        default_factory=lambda: _relative(0.0), description="Target-language bits per byte may exceed the source "
        "model's by at most this margin (relative 0: no worse than the source)."
    )
    source_bpb: Margin = Field(
        default_factory=lambda: _relative(0.25), description="Source-language (English) bits per byte may exceed "
        "the source model's by at most this margin (the forgetting check)."
    )
    target_fertility_reduction: Margin = Field(
        default_factory=lambda: _relative(0.10), description="Target-language tokens per word must be lower with "
        "the target tokenizer than with the source tokenizer by at least this much (relative: a fraction, < 1)."
    )
    generated_tokens_per_character: Margin = Field(
        default_factory=lambda: _relative(0.10), description="The candidate's generations on the evaluation "
        "prompts must take at least this much fewer tokens per character than the source model's (relative 0.10: "
        "10% fewer; metric generation.tokens_per_character, logged by `vocadapt evaluate`). Deterministic: counts, "
        "no clock. A vocabulary that is shorter on the corpus but never used when generating fails it."
    )
    generated_token_saving: Margin = Field(
        default_factory=lambda: _absolute(0.10), description="The candidate's generations must take at least this "
        "share fewer tokens than the source tokenizer needs for the same generated text (absolute 0.10: 10% fewer; "
        "metric generation.same_text_token_saving, logged by `vocadapt adapt` and `vocadapt evaluate`). Tokens per "
        "character also move with *what* a model writes (copying more of an English prompt is cheaper per "
        "character): this one compares two tokenizations of one text, so only the new tokens the model chose to "
        "write pass it. Deterministic: counts, no clock."
    )
    benchmarks: dict[str, Margin] = Field(
        default_factory=lambda: {key: _absolute(value) for key, value in DEFAULT_BENCHMARK_MARGINS.items()},
        description="How far each benchmark score (metric benchmark.<task>.<measure>, higher is better) may fall "
        "below the source model's (source_model.benchmark.<task>.<measure>), keyed by '<task>.<measure>' or by "
        "'<measure>' (acc, acc_bytes, chrf; the task's own key wins). A given mapping replaces the defaults "
        "(acc, acc_norm, acc_bytes: 0.02 absolute; chrf: 1.0 absolute). A benchmark without a margin fails.",
    )
    require_benchmarks: bool = Field(
        False, description="Refuse when no benchmark scores were logged (otherwise that gate is skipped)."
    )

    @model_validator(mode="before")
    @classmethod
    def _no_shared_margins(cls, data: Any) -> Any:
        old = [key for key in _REPLACED_KEYS if isinstance(data, Mapping) and key in data]
        if old:
            fixes = "; ".join(f"{key} -> {_REPLACED_KEYS[key]}" for key in old)
            raise ValueError(f"{', '.join(old)}: a bare margin does not say its kind or unit; each gate now states "
                             f"its own margin, absolute or relative: {fixes}")
        return data

    @field_validator("generated_token_saving")
    @classmethod
    def _saving_is_absolute(cls, margin: Margin) -> Margin:
        if margin.absolute is None or margin.absolute >= 1:
            raise ValueError("the token saving is already a share of the source tokenizer's tokens: give it as "
                             "{absolute: X} with X below 1 (0.10: at least 10% fewer tokens on the same text)")
        return margin

    @field_validator("target_fertility_reduction", "generated_tokens_per_character")
    @classmethod
    def _reduction_below_one(cls, margin: Margin) -> Margin:
        if margin.relative is not None and margin.relative >= 1:
            raise ValueError(f"a relative reduction of {margin.relative:g} asks for zero tokens; give a "
                             f"fraction below 1 (0.10: at least 10% fewer)")
        return margin

    def benchmark_margin(self, key: str) -> Margin | None:
        """The margin for ``benchmark.<task>.<measure>``: its own entry, else its measure's, else None."""
        name = key.removeprefix("benchmark.")
        return self.benchmarks.get(name) or self.benchmarks.get(name.rsplit(".", 1)[-1])


@dataclass
class GateResult:
    gate: str
    measured: float | None
    threshold: float | None
    passed: bool
    detail: str
    reference: float | None = None
    margin: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"gate": self.gate, "measured": self.measured, "reference": self.reference, "margin": self.margin,
                "threshold": self.threshold, "passed": self.passed, "detail": self.detail}


@dataclass
class PromotionDecision:
    name: str
    version: int
    alias: str
    gates: list[GateResult]
    previous: int | None = None
    tags: dict[str, str] = field(default_factory=dict)
    gates_from: str = ""  # where the gates came from: a --gates file, the version's recorded gates, the defaults

    @property
    def accepted(self) -> bool:
        return all(gate.passed for gate in self.gates)


def _first(metrics: Mapping[str, float], *keys: str) -> tuple[str, float | None]:
    for key in keys:
        if key in metrics:
            return key, metrics[key]
    return keys[0], None


def _gate(gate: str, metrics: Mapping[str, float], measured_key: str, reference_key: str, margin: Margin, *,
          direction: Literal["at_most_plus", "at_most_minus", "at_least_minus"]) -> GateResult:
    """Compare ``measured_key`` with ``reference_key`` moved by the margin.

    at_most_plus: measured <= reference + margin (no worse, lower is better); at_most_minus: measured <= reference
    - margin (at least that much lower); at_least_minus: measured >= reference - margin (higher is better).
    """
    measured, reference = metrics.get(measured_key), metrics.get(reference_key)
    if measured is None or reference is None:
        missing = [k for k, v in ((measured_key, measured), (reference_key, reference)) if v is None]
        return GateResult(gate, measured, None, False, f"not measured: metric {missing} missing", reference,
                          margin.describe())
    sign = "+" if direction == "at_most_plus" else "-"
    threshold = reference + margin.allowance(reference) * (1 if sign == "+" else -1)
    rule = ">=" if direction == "at_least_minus" else "<="
    passed = measured >= threshold if rule == ">=" else measured <= threshold
    return GateResult(gate, measured, threshold, passed, f"{measured_key} {rule} {reference_key} {sign} margin",
                      reference, margin.describe())


def _at_least(gate: str, metrics: Mapping[str, float], key: str, margin: Margin) -> GateResult:
    """``key`` >= the margin itself: a measure that is already relative to the source (no source value to move)."""
    measured, threshold = metrics.get(key), margin.allowance(0.0)
    if measured is None:
        return GateResult(gate, None, threshold, False, f"not measured: metric ['{key}'] missing", None,
                          margin.describe())
    return GateResult(gate, measured, threshold, measured >= threshold, f"{key} >= margin", None, margin.describe())


def evaluate_gates(metrics: Mapping[str, float], gates: PromotionGates, language: str) -> list[GateResult]:
    """Check ``gates`` against a version's metrics (its run's, plus its parent run's). Missing metrics fail."""
    results = []
    for stream, margin, name in (("target", gates.target_bpb, "target bits per byte"),
                                 ("source", gates.source_bpb, "source-language bits per byte")):
        key, _ = _first(metrics, f"bpb_{stream}_after_lapt", f"bpb_{stream}_zero_shot")
        results.append(_gate(name, metrics, key, f"source_model.bpb_{stream}", margin, direction="at_most_plus"))
    results.append(_gate("target fertility", metrics, f"fertility.target_tokenizer.{language}.tokens_per_word",
                         f"fertility.source_tokenizer.{language}.tokens_per_word", gates.target_fertility_reduction,
                         direction="at_most_minus"))
    results.append(_gate("generated tokens per character", metrics, "generation.tokens_per_character",
                         "source_model.generation.tokens_per_character", gates.generated_tokens_per_character,
                         direction="at_most_minus"))
    results.append(_at_least("generated tokens saved on the same text", metrics, "generation.same_text_token_saving",
                             gates.generated_token_saving))
    results.extend(_benchmark_gates(metrics, gates))
    return results


def _benchmark_gates(metrics: Mapping[str, float], gates: PromotionGates) -> list[GateResult]:
    scores = {key: value for key, value in metrics.items()
              if key.startswith("benchmark.") and not key.endswith("_stderr")}
    if not scores:
        return [GateResult("benchmarks", None, None, not gates.require_benchmarks,
                           "no benchmark.* metrics logged" + (" (required)" if gates.require_benchmarks
                                                              else ": skipped"))]
    results = []
    for key, score in sorted(scores.items()):
        margin = gates.benchmark_margin(key)
        if margin is None:
            measure = key.rsplit(".", 1)[-1]
            results.append(GateResult(key, score, None, False, f"no margin declared: add promotion.benchmarks."
                                      f"{measure}: {{absolute: X}} or {{relative: X}} to the gates"))
            continue
        results.append(_gate(key, metrics, key, f"source_model.{key}", margin, direction="at_least_minus"))
    return results


def gate_table(decision: PromotionDecision):
    """The gates for the console: each gate's measured value, the source model's, its margin with its kind (rel: a
    fraction of the source's value, abs: in the metric's units), the threshold they make and the verdict; then each
    gate's rule, under the table so the table fits 80 columns."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    verdict = "[green]accepted[/]" if decision.accepted else "[red]refused[/]"
    table = Table(title=f"{decision.name} version {decision.version} -> @{decision.alias}: {verdict}",
                  caption="margin: rel = fraction of the source model's value, abs = in the metric's units")
    for column, justify in (("gate", "left"), ("measured", "right"), ("source", "right"), ("margin", "right"),
                            ("threshold", "right"), ("result", "left")):
        table.add_column(column, justify=justify, no_wrap=column != "gate")
    number = lambda value: "-" if value is None else f"{value:.4f}"  # noqa: E731
    for gate in decision.gates:
        margin = gate.margin.replace(" relative", " rel").replace(" absolute", " abs") or "-"
        table.add_row(gate.gate, number(gate.measured), number(gate.reference), margin, number(gate.threshold),
                      "[green]pass[/]" if gate.passed else "[red]FAIL[/]")
    rules = Text("\n".join(f"  {gate.gate}: {gate.detail}" for gate in decision.gates))
    return Group(table, rules)
