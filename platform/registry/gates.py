"""Promotion gates: what a model version must show, against its source model, before an alias moves to it.

Each gate states its own margin, absolute (in the metric's units) or relative (a fraction of the source model's
value), because the measures do not share a scale: accuracy is 0-1, chrF 0-100, bits per byte about 1-6, tokens per
word about 1-3. Pure checks over logged metrics; ``platform/registry/model_versions.py`` reads the metrics and moves the alias.

**Out of domain.** The default bits-per-byte gates read ``bpb_ood_target`` / ``bpb_ood_source``: bits per byte on
text from a source no training stream and no tokenizer training saw (``evaluation.out_of_domain_text``, Debian's
fortunes by default; ``adapt`` refuses a run whose out-of-domain text overlaps its training text). A held-out split
of the training corpora flatters an adapted model; it stays logged (``bpb_target_after_lapt``...) as a diagnostic,
and ``bpb_text: held_out`` gates on it instead (an old run without out-of-domain metrics can only be judged so).

**Noise.** Each gate reports its estimate with a 95% interval from a paired bootstrap over the documents or items
both models were scored on (``components/evaluation/bootstrap.py``; the per-item parts are the run's
``gates/items.json``), and its rule says what it requires of the interval. With ``d`` = candidate - source and
``a`` the margin in metric units:

- lower is better (bits per byte: ``d <= a``; fewer tokens: ``d <= -a``): **pass** when the interval's upper end
  meets the bound (the candidate is shown to be within the margin); **undecided** when only the point estimate
  does (inside its noise: not promoted); **fail** otherwise;
- higher is better (benchmarks, ``d >= -a``): **pass** unless the whole interval lies below ``-a`` (the candidate
  is not worse than the source beyond its interval); **fail** when it does. This rule is lenient on few items: a
  candidate whose point estimate is below ``-a`` passes while its interval still reaches ``-a``;
- an absolute floor on one model's measure (same-text token saving ``>= a``): **pass** when the interval's lower end
  meets it, **undecided** when only the estimate does.

A gate whose per-item parts were not logged (a run from before ``gates/items.json``, or scores from ``vocadapt
evaluate``) has no interval: undecided where its estimate passes, unless ``require_intervals: false`` (then judged
on the point estimate). lm-eval scores with a ``_stderr`` get a normal interval from both standard errors instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from vocadapt.components.evaluation.bootstrap import (
    DEFAULT_RESAMPLES, Interval, ItemParts, bootstrap_interval, paired_bootstrap,
)
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
        default_factory=lambda: _relative(0.0), description="Target-language bits per byte on out-of-domain text "
        "(bpb_ood_target; see bpb_text) may exceed the source model's by at most this margin (relative 0: no "
        "worse than the source). Rule: the upper end of the 95% interval of candidate - source (documents "
        "resampled, both models on the same ones) is at most the margin; undecided when only the estimate is."
    )
    source_bpb: Margin = Field(
        default_factory=lambda: _relative(0.25), description="Source-language (English) bits per byte on "
        "out-of-domain text (bpb_ood_source) may exceed the source model's by at most this margin (the "
        "forgetting check). Rule as target_bpb."
    )
    bpb_text: Literal["out_of_domain", "held_out"] = Field(
        "out_of_domain", description="Which text the bits-per-byte gates read: 'out_of_domain' (bpb_ood_*, text "
        "no training saw: evaluation.out_of_domain_text) or 'held_out' (bpb_*_after_lapt, else _zero_shot: the "
        "training corpora's held-out split, which flatters an adapted model; for runs that predate out-of-domain "
        "metrics). No per-document parts are logged for the held-out split: judge it with require_intervals "
        "false."
    )
    require_intervals: bool = Field(
        True, description="A gate without an interval (no per-item parts in the run's gates/items.json, no "
        "standard errors) is undecided, not passed. false: such a gate is judged on its point estimate."
    )
    bootstrap_resamples: int = Field(
        DEFAULT_RESAMPLES, ge=100, description="Resamples of the paired bootstrap behind each gate's 95% interval."
    )
    bootstrap_seed: int = Field(0, description="Seed of the bootstrap's draws: same items and seed, same intervals.")
    target_fertility_reduction: Margin = Field(
        default_factory=lambda: _relative(0.10), description="Target-language tokens per word must be lower with "
        "the target tokenizer than with the source tokenizer by at least this much (relative: a fraction, < 1). "
        "Rule: the upper end of the interval of target - source tokens per word (held-out documents resampled) "
        "is at most minus the margin."
    )
    generated_tokens_per_character: Margin = Field(
        default_factory=lambda: _relative(0.10), description="The candidate's generations on the evaluation "
        "prompts must take at least this much fewer tokens per character than the source model's (relative 0.10: "
        "10% fewer; metric generation.tokens_per_character, logged by `vocadapt evaluate`). Deterministic: counts, "
        "no clock. A vocabulary that is shorter on the corpus but never used when generating fails it. Rule: the "
        "upper end of the interval of candidate - source (prompts resampled) is at most minus the margin."
    )
    generated_token_saving: Margin = Field(
        default_factory=lambda: _absolute(0.10), description="The candidate's generations must take at least this "
        "share fewer tokens than the source tokenizer needs for the same generated text (absolute 0.10: 10% fewer; "
        "metric generation.same_text_token_saving, logged by `vocadapt adapt` and `vocadapt evaluate`). Tokens per "
        "character also move with *what* a model writes (copying more of an English prompt is cheaper per "
        "character): this one compares two tokenizations of one text, so only the new tokens the model chose to "
        "write pass it. Deterministic: counts, no clock. Rule: the lower end of its interval (prompts "
        "resampled) is at least the margin."
    )
    benchmarks: dict[str, Margin] = Field(
        default_factory=lambda: {key: _absolute(value) for key, value in DEFAULT_BENCHMARK_MARGINS.items()},
        description="How far each benchmark score (metric benchmark.<task>.<measure>, higher is better) may fall "
        "below the source model's (source_model.benchmark.<task>.<measure>), keyed by '<task>.<measure>' or by "
        "'<measure>' (acc, acc_bytes, chrf; the task's own key wins). A given mapping replaces the defaults "
        "(acc, acc_norm, acc_bytes: 0.02 absolute; chrf: 1.0 absolute). A benchmark without a margin fails. "
        "Rule: the candidate is not worse than the source beyond its interval: the upper end of the 95% interval "
        "of candidate - source (items resampled; chrF from sacrebleu's statistics) is at least minus the margin.",
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
    """pass / fail / undecided from the point estimate and (when there is one) the interval; see the module doc."""
    if interval_ok is None:  # no interval
        if not gates.require_intervals:
            return "pass" if point_ok else "fail"
        return "undecided" if point_ok else "fail"
    if interval_ok:
        return "pass"
    return "fail" if lenient or not point_ok else "undecided"


@dataclass(frozen=True)
class _Evidence:
    """What every gate reads: the run's metrics, the per-item parts their intervals are bootstrapped from, and the
    gates' settings."""

    metrics: Mapping[str, float]
    items: Mapping[str, ItemParts]
    gates: PromotionGates


def _gate(gate: str, evidence: _Evidence, measured_key: str, reference_key: str, margin: Margin,
          direction: Direction) -> GateResult:
    """Compare ``measured_key`` with ``reference_key`` moved by the margin, on the estimate and its interval.

    With d = measured - reference and a the margin: at_most_plus: d <= a (no worse, lower is better); at_most_minus:
    d <= -a (at least that much lower); at_least_minus: d >= -a (higher is better). The rule on the interval is
    the module doc's.
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


def _at_least(gate: str, metrics: Mapping[str, float], key: str, margin: Margin,
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


def gated_languages(tags: Mapping[str, str]) -> list[str]:
    """The target languages a version is gated on, from its lineage tags: ``vocadapt.target_languages`` (several,
    comma-separated, the first primary), else ``vocadapt.target_language``, else Italian (versions from before the
    tag)."""
    several = tags.get("vocadapt.target_languages")
    if several:
        return [language.strip() for language in several.split(",") if language.strip()]
    return [tags.get("vocadapt.target_language") or "it"]


def evaluate_gates(metrics: Mapping[str, float], gates: PromotionGates, language: str | Sequence[str],
                   items: Mapping[str, ItemParts] | None = None) -> list[GateResult]:
    """Check ``gates`` against a version's metrics (its run's, plus its parent run's) and, for the intervals, the
    per-item parts logged with them (``gates/items.json``: candidate's under the metric's name, the source
    model's under ``source_model.``). Missing metrics fail.

    ``language``: the target language, or the target languages of one model (the first primary). With several,
    every per-language gate (target bits per byte, fertility, generated tokens per character, tokens saved on the
    same text) is one gate per language, named ``<gate> (<code>)`` and reading that language's metrics (the first's
    are the one-language names; a further one's ``bpb_ood_target_<code>``, ``generation.<code>.*``): a promotion
    needs every language to pass. Benchmarks are gated per task, and the tasks already name their language."""
    from vocadapt.components.training.settings import language_stream

    items = items or {}
    evidence = _Evidence(metrics, items, gates)
    languages = [language] if isinstance(language, str) else list(language)
    several = len(languages) > 1
    results = []
    for code in languages:
        stream = language_stream(code, languages[0])
        results.append(_bpb_gate(f"target bits per byte ({code})" if several else "target bits per byte", stream,
                                 gates.target_bpb, evidence))
    results.append(_bpb_gate("source-language bits per byte", "source", gates.source_bpb, evidence))
    for code in languages:
        scope = "" if code == languages[0] else code
        named = (lambda gate: f"{gate} ({code})") if several else (lambda gate: gate)  # noqa: E731
        results.append(_gate(named("target fertility"), evidence, f"fertility.target_tokenizer.{code}.tokens_per_word",
                             f"fertility.source_tokenizer.{code}.tokens_per_word", gates.target_fertility_reduction,
                             "at_most_minus"))
        tokens_per_character = _generation_key("tokens_per_character", scope)
        results.append(_gate(named("generated tokens per character"), evidence, tokens_per_character,
                             f"source_model.{tokens_per_character}", gates.generated_tokens_per_character,
                             "at_most_minus"))
        results.append(_at_least(named("generated tokens saved on the same text"), metrics,
                                 _generation_key("same_text_token_saving", scope), gates.generated_token_saving,
                                 items, gates))
    results.extend(_benchmark_gates(metrics, gates, items))
    return results


def _generation_key(measure: str, scope: str) -> str:
    """A generation measure's metric: ``generation.<measure>`` (the first target language), else
    ``generation.<code>.<measure>`` (as ``pipelines/side_by_side.py`` logs them)."""
    return f"generation.{scope}.{measure}" if scope else f"generation.{measure}"


def _bpb_gate(name: str, stream: str, margin: Margin, evidence: _Evidence) -> GateResult:
    """One bits-per-byte gate on ``stream`` (``target``, ``target_<code>``, ``source``): out-of-domain text, or the
    held-out split with ``bpb_text: held_out``."""
    if evidence.gates.bpb_text == "out_of_domain":
        result = _gate(name, evidence, f"bpb_ood_{stream}", f"source_model.bpb_ood_{stream}", margin, "at_most_plus")
        if result.measured is None or result.reference is None:
            result = replace(result, detail=result.detail + (
                " (no out-of-domain text for this language: declare evaluation.out_of_domain_text; a run from before "
                "out-of-domain gates: judge its held-out split with a --gates file setting bpb_text: held_out and "
                "require_intervals: false)"))
        return result
    key, _ = _first(evidence.metrics, f"bpb_{stream}_after_lapt", f"bpb_{stream}_zero_shot")
    return _gate(name, evidence, key, f"source_model.bpb_{stream}", margin, "at_most_plus")


def _benchmark_gates(metrics: Mapping[str, float], gates: PromotionGates,
                     items: Mapping[str, ItemParts] | None = None) -> list[GateResult]:
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
        results.append(_gate(key, _Evidence(metrics, items or {}, gates), key, f"source_model.{key}", margin,
                             "at_least_minus"))
    return results


def gate_table(decision: PromotionDecision):
    """The gates for the console: each gate's difference (candidate - source; the measure itself for a floor) with
    its 95% interval, the bound the rule compares it with, and the verdict (undecided: passes on its estimate,
    inside its noise); under the table, each gate's measured and source values, margin (rel = a fraction of the
    source's value, abs = in the metric's units) and rule, so the table fits 80 columns."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    verdict = "[green]accepted[/]" if decision.accepted else "[red]refused[/]"
    table = Table(title=f"{decision.name} version {decision.version} -> @{decision.alias}: {verdict}",
                  box=box.SIMPLE_HEAD, caption="diff: candidate - source (the measure itself for a floor), with its "
                  "95% interval from a paired bootstrap")
    table.add_column("gate", min_width=24)
    for column in ("diff [95% interval]", "bound", "result"):
        table.add_column(column, justify="left" if column == "result" else "right", no_wrap=True)
    number = lambda value, sign="": "-" if value is None else f"{value:{sign}.3f}"  # noqa: E731
    results = {"pass": "[green]pass[/]", "fail": "[red]FAIL[/]", "undecided": "[yellow]undecided[/]"}
    for gate in decision.gates:
        spread = "-" if gate.difference is None else number(gate.difference, "+") + (
            f" [{gate.interval.low:+.3f}, {gate.interval.high:+.3f}]" if gate.interval else " (no interval)")
        table.add_row(gate.gate, spread, number(gate.bound, "+"), results.get(gate.verdict, gate.verdict))

    def rule(gate: GateResult) -> str:
        values = f"{number(gate.measured)}" + (f" vs source {number(gate.reference)}"
                                               if gate.reference is not None else "")
        margin = gate.margin.replace(" relative", " rel").replace(" absolute", " abs")
        return f"  {gate.gate}: {values}" + (f", margin {margin}" if margin else "") + f"; {gate.detail}"

    return Group(table, Text("\n".join(rule(gate) for gate in decision.gates)))
