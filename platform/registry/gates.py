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

This module lists the gates (one per target language where a measure is per language) and draws them for the
console; ``gate_settings.py`` holds the margins and their defaults, ``gate_verdicts.py`` the intervals and the rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from vocadapt.components.evaluation.bootstrap import ItemParts
from vocadapt.platform.registry.gate_settings import (  # noqa: F401  (re-exported: the gates' public names)
    DEFAULT_BENCHMARK_MARGINS, Margin, PromotionGates,
)
from vocadapt.platform.registry.gate_verdicts import GateEvidence, GateResult, difference_gate, floor_gate


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
    evidence = GateEvidence(metrics, items, gates)
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
        results.append(difference_gate(named("target fertility"), evidence,
                                       f"fertility.target_tokenizer.{code}.tokens_per_word",
                                       f"fertility.source_tokenizer.{code}.tokens_per_word",
                                       gates.target_fertility_reduction, "at_most_minus"))
        tokens_per_character = _generation_key("tokens_per_character", scope)
        results.append(difference_gate(named("generated tokens per character"), evidence, tokens_per_character,
                                       f"source_model.{tokens_per_character}", gates.generated_tokens_per_character,
                                       "at_most_minus"))
        results.append(floor_gate(named("generated tokens saved on the same text"), metrics,
                                  _generation_key("same_text_token_saving", scope), gates.generated_token_saving,
                                  items, gates))
    results.extend(_benchmark_gates(metrics, gates, items))
    return results


def _generation_key(measure: str, scope: str) -> str:
    """A generation measure's metric: ``generation.<measure>`` (the first target language), else
    ``generation.<code>.<measure>`` (as ``pipelines/side_by_side.py`` logs them)."""
    return f"generation.{scope}.{measure}" if scope else f"generation.{measure}"


def _bpb_gate(name: str, stream: str, margin: Margin, evidence: GateEvidence) -> GateResult:
    """One bits-per-byte gate on ``stream`` (``target``, ``target_<code>``, ``source``): out-of-domain text, or the
    held-out split with ``bpb_text: held_out``."""
    if evidence.gates.bpb_text == "out_of_domain":
        result = difference_gate(name, evidence, f"bpb_ood_{stream}", f"source_model.bpb_ood_{stream}", margin,
                                 "at_most_plus")
        if result.measured is None or result.reference is None:
            result = replace(result, detail=result.detail + (
                " (no out-of-domain text for this language: declare evaluation.out_of_domain_text; a run from before "
                "out-of-domain gates: judge its held-out split with a --gates file setting bpb_text: held_out and "
                "require_intervals: false)"))
        return result
    key, _ = _first(evidence.metrics, f"bpb_{stream}_after_lapt", f"bpb_{stream}_zero_shot")
    return difference_gate(name, evidence, key, f"source_model.bpb_{stream}", margin, "at_most_plus")


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
        results.append(difference_gate(key, GateEvidence(metrics, items or {}, gates), key, f"source_model.{key}",
                                       margin, "at_least_minus"))
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
