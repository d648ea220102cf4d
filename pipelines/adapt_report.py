"""What the adapt pipeline prints and what it logs as tables: the fertility table and its flat metrics, the
expansion summary, the bits-per-byte table (printed, and logged as ``bits_per_byte.json``), the side-by-side
tables, the promotion-gate preview and the JSON summary."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.console import Console

if TYPE_CHECKING:
    from vocadapt.pipelines.adapt_outcomes import AdaptResult, MethodOutcome
    from vocadapt.platform.config import ExperimentConfig


def fertility_metrics(fertility: dict[str, dict[str, float]]) -> dict[str, float]:
    """The fertility table as flat metrics, ``fertility.<tokenizer>.<language>.<measure>``: its numbers only."""
    return {
        f"fertility.{key}.{measure}": value
        for key, report in fertility.items()
        for measure, value in report.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    }


def expansion_summary(expansion, inputs) -> dict[str, Any]:
    """What the expansion added and skipped, and which source-language word list it protected."""
    summary = {
        "source_vocab_size": expansion.source_vocab_size,
        "new_tokens": len(expansion.new_token_ids),
        "intermediate_tokens": len(expansion.intermediate_token_ids),
        "skipped": expansion.skipped,
        "protected_lexicon": inputs.source_lexicon.name if inputs.source_lexicon else None,
    }
    if hasattr(expansion, "planned"):  # several target languages: how the budget was split
        summary["budget"] = {"rule": expansion.rule, "planned": expansion.planned, "added": expansion.added}
    return summary


def bits_per_byte_table(outcomes: list[MethodOutcome], source_bpb: dict[str, float]) -> dict[str, Any]:
    """The source model's and every method's held-out bits per byte (the parent run's ``bits_per_byte.json``)."""
    return {
        "source_model": source_bpb,
        "methods": {outcome.method: outcome.bits_per_byte for outcome in outcomes},
    }


def print_fertility(fertility: dict[str, dict[str, Any]], console: Console) -> None:
    from rich.table import Table

    measures = ("tokens_per_word", "tokens_per_character", "tokens_per_byte", "parity")
    table = Table(title="Fertility on held-out text (tokens per word only where words are delimited)")
    table.add_column("tokenizer.language")
    for measure in measures:
        table.add_column(measure, justify="right")
    for key, report in fertility.items():
        table.add_row(key, *(_number(report.get(m)) for m in measures))
    console.print(table)


def _number(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"


def print_summary(result: AdaptResult, config: ExperimentConfig, console: Console) -> None:
    from rich.table import Table

    from vocadapt.pipelines.vocabulary_steps import language_streams

    ranked_on = "held-out" if result.best.out_of_domain_target_bpb() is None else "out-of-domain"  # MethodOutcome.score
    table = Table(title=f"Bits per byte on held-out text (lower is better); best on {ranked_on} text: "
                        f"{result.best.method}")
    streams = language_streams(config)  # target, target_<code> for each further target language, source
    columns = [(f"{stream}_{stage}", f"{code} {title}") for stage, title in (("zero_shot", "step 0"),
                                                                               ("after_lapt", "after LAPT"))
               for stream, code in streams]
    table.add_column("model")
    for _, title in columns:
        table.add_column(title, justify="right")
    table.add_row("source model", *(f"{result.source_bits_per_byte[stream]:.3f}"
                                    if stream in result.source_bits_per_byte else "-" for stream, _ in streams),
                  *([""] * len(streams)))
    for outcome in result.methods:
        table.add_row(outcome.method, *(f"{outcome.bits_per_byte[k]:.3f}" if k in outcome.bits_per_byte else "-"
                                        for k, _ in columns))
    console.print(table)
    for language in config.target.languages:
        source_key, target_key = f"source_tokenizer.{language}", f"target_tokenizer.{language}"
        measure = "tokens_per_word" if result.fertility[source_key]["tokens_per_word"] else "tokens_per_character"
        before, after = result.fertility[source_key][measure], result.fertility[target_key][measure]
        console.print(f"{language} fertility: {before:.3f} -> {after:.3f} {measure.replace('_', ' ')} "
                      f"({1 - after / before:.1%} lower)")
    if result.source_side_by_side:
        print_side_by_side(result, config, console)
    if result.registered:
        name, version = result.registered
        console.print(f"registered [bold]{name}[/] version {version} with alias [bold]candidate[/]")
        print_gate_preview(result, config, console)
    console.print(f"outputs: {result.output_dir}")
    console.print(f"MLflow: run `mlflow ui --backend-store-uri {result.tracking_uri}` and open http://127.0.0.1:5000"
                  if result.tracking_uri.startswith("sqlite") else f"MLflow: {result.tracking_uri}")


def summary_json(result: AdaptResult) -> str:
    return json.dumps(
        {
            "parent_run_id": result.parent_run_id,
            "best_method": result.best.method,
            "fertility": result.fertility,
            "source_bits_per_byte": result.source_bits_per_byte,
            "methods": {o.method: o.bits_per_byte for o in result.methods},
            "registered": list(result.registered) if result.registered else None,
            "output_dir": str(result.output_dir),
        },
        indent=2,
    )


# (metric key without prefix, column title, digits); {scope}: "" for the first target language, "<code>." for a
# further one; {stream}: its out-of-domain stream (target, target_<code>)
SIDE_BY_SIDE_COLUMNS = (
    ("benchmark.side_by_side_cloze_{lang}.acc_bytes", "cloze", 3),
    ("benchmark.side_by_side_translation_{english}_{lang}.chrf", "chrF", 1),
    ("generation.{scope}tokens_per_character", "tok/char", 3),
    ("generation.{scope}percent_generated_new", "%Gen", 1),
    ("generation.{scope}same_text_token_saving", "saved", 3),
    ("generation.{scope}equal_content_speed_up", "speed-up", 2),
    ("bpb_ood_{stream}", "{lang} OOD", 3),
    ("bpb_ood_source", "{english} OOD", 3),
)


def print_side_by_side(result: AdaptResult, config: ExperimentConfig, console: Console) -> None:
    """The side-by-side benchmark (pipelines/side_by_side.py): the source model and every method's final model; one
    table per target language (the English out-of-domain text in the first)."""
    from vocadapt.pipelines.vocabulary_steps import language_streams

    for stream, language in language_streams(config)[:-1]:
        names = {"lang": language, "english": config.target.source_language, "stream": stream,
                 "scope": "" if stream == "target" else f"{language}."}
        _print_side_by_side_language(result, config, console, names, first=stream == "target")


def _print_side_by_side_language(result: AdaptResult, config: ExperimentConfig, console: Console,
                                 names: dict[str, str], first: bool) -> None:
    from rich.table import Table

    columns = [(key.format(**names), title.format(**names), digits) for key, title, digits in SIDE_BY_SIDE_COLUMNS
               if first or key != "bpb_ood_source"]
    columns = [column for column in columns
               if f"source_model.{column[0]}" in result.source_side_by_side
               or any(column[0] in outcome.side_by_side for outcome in result.methods)]
    if not columns:
        return
    title = f"Side by side, {config.evaluation.side_by_side_items} items" + ("" if first else f", {names['lang']}")
    table = Table(title=title,
                  caption=f"cloze: {names['lang']} acc_bytes; chrF: {names['english']}->{names['lang']}; tok/char and "
                  f"%Gen: of the {names['lang']} text each model generates; saved: tokens it saved on that same text against the "
                  f"source tokenizer; speed-up: decoding the same held-out {names['lang']} text, source time over the "
                  "model's; OOD: bits per byte on out-of-domain text (Debian fortunes)")
    table.add_column("model", no_wrap=True)
    for _, title, _ in columns:
        table.add_column(title, justify="right")

    def cells(metrics: dict[str, float], prefix: str = "") -> list[str]:
        return [f"{metrics[prefix + key]:.{digits}f}" if prefix + key in metrics else "-"
                for key, _, digits in columns]

    table.add_row("source", *cells(result.source_side_by_side, "source_model."))
    for outcome in result.methods:
        table.add_row(outcome.method, *cells(outcome.side_by_side))
    console.print(table)


def print_gate_preview(result: AdaptResult, config: ExperimentConfig, console: Console) -> None:
    """The default promotion gates on the registered candidate's metrics and per-item parts, as `vocadapt promote`
    will judge them (estimates with their 95% intervals)."""
    from vocadapt.platform.registry.gates import PromotionDecision, PromotionGates, evaluate_gates, gate_table

    best = result.best
    metrics = dict(result.parent_metrics)
    metrics |= {f"bpb_{key}": value for key, value in best.bits_per_byte.items()} | best.side_by_side
    name, version = result.registered
    items = result.parent_gate_items | best.gate_items  # the per-item parts `promote` reads from gates/items.json
    decision = PromotionDecision(name, version, "champion", evaluate_gates(metrics, PromotionGates(),
                                                                           config.target.languages, items))
    console.print(gate_table(decision))
    verdict = "passes every default gate" if decision.accepted else \
        "does not pass every default gate (above: failed, or undecided within its 95% interval)"
    console.print(f"candidate {best.method} {verdict}; promote with `vocadapt promote {name} --version {version} --to champion`",
                  highlight=False)
