"""The adapt pipeline's fertility step: both tokenizers' tokens per word on held-out text of every language, with
parity against the English side of aligned paragraphs, logged on the parent run with the per-document parts from
which ``vocadapt promote`` bootstraps each gate's interval."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from vocadapt.pipelines.adapt_report import fertility_metrics, print_fertility
from vocadapt.pipelines.side_by_side import fertility_parts
from vocadapt.pipelines.vocabulary_steps import language_streams

if TYPE_CHECKING:
    from vocadapt.pipelines.recipe import Recipe
    from vocadapt.platform.assets.sources import ResolvedInputs
    from vocadapt.platform.config import ExperimentConfig


def measure_fertility(recipe: Recipe) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Both tokenizers' fertility on held-out text, logged and printed; returns the table and its per-document
    parts, the first of the parent run's gate items."""
    config, tracker, parent_id = recipe.config, recipe.tracker, recipe.parent_id
    source_tokenizer, replacement, held_out = recipe.source_tokenizer, recipe.replacement, recipe.held_out
    with recipe.stage("evaluation", "[bold]3. fertility"):
        fertility = fertility_table(source_tokenizer, replacement, held_out, config,
                               parallel_held_out(config, recipe.inputs))
    tracker.log_metrics(parent_id, fertility_metrics(fertility))
    tracker.log_dict(parent_id, fertility, "fertility.json")
    print_fertility(fertility, recipe.console)
    # per-document parts of the gated measures (fertility here, the source model's scores next), from which
    # `vocadapt promote` bootstraps each gate's interval: the parent run's gates/items.json
    parent_items = {}
    for stream, code in language_streams(config)[:-1]:  # every target language's documents
        parent_items |= fertility_parts(source_tokenizer, replacement.tokenizer, held_out[stream], code)
    return fertility, parent_items



def fertility_table(source_tokenizer, change, held_out, config, parallel) -> dict[str, dict[str, Any]]:
    """Fertility of both tokenizers on held-out target and source-language text, language-aware (tokens per
    word only where the script delimits words), with parity against the English side of aligned paragraphs."""
    from dataclasses import asdict

    from vocadapt.components.tokenizers.fertility import ParallelText
    from vocadapt.components.tokenizers.language_fertility import LanguageDocuments, language_fertility_report

    english = config.target.source_language
    table = {}
    for name, tokenizer in (("source", source_tokenizer), ("target", change.tokenizer)):
        for stream, lang in language_streams(config):
            report = language_fertility_report(
                tokenizer, LanguageDocuments(held_out[stream], lang), name=f"{name}_tokenizer",
                new_token_ids=change.new_token_ids if name == "target" else None,
            )
            table[f"{name}_tokenizer.{lang}"] = asdict(report)
        for language, pairs in (parallel or {}).items():
            aligned = language_fertility_report(tokenizer, LanguageDocuments(
                pairs[language], language,
                reference=ParallelText(pairs[english], tokenizer=source_tokenizer, language=english)))
            table[f"{name}_tokenizer.{language}"]["parity"] = aligned.parity
    return table


def parallel_held_out(config: ExperimentConfig, inputs: ResolvedInputs) -> dict[str, dict[str, list[str]]] | None:
    """Aligned held-out paragraphs per target language, {it: {it: [...], en: [...]}}, from the embedded default,
    for parity."""
    if not inputs.embedded or config.corpus.train != "embedded":
        return None
    from vocadapt.platform.assets.embedded import load_assets

    english, assets = config.target.source_language, load_assets(languages=config.target.languages)
    parallel = {}
    for language in config.target.languages:
        path = assets.parallel(language, "validation")
        pairs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[: config.evaluation.max_documents]]
        parallel[language] = {language: [p[language] for p in pairs], english: [p[english] for p in pairs]}
    return parallel
