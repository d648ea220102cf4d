"""A small benchmark scored in memory, the same way for the source model and every adapted model, side by side.

What ``adapt`` logs so the registry's promotion gates can judge the promise (same quality, fewer tokens), and what
``benchmarks/recovery.py`` measures along training:

- ``benchmark.side_by_side_cloze_<lang>.acc_bytes``: Italian cloze (the true second half of a held-out paragraph
  among three others), byte-normalised log-likelihood (:mod:`components.evaluation.cloze_scoring`);
- ``benchmark.side_by_side_translation_en_<lang>.chrf``: greedy one-shot en->target translation of held-out
  parallel pairs, SAVA's prompt, chrF (sacrebleu);
- ``generation.tokens_per_character`` and ``generation.percent_generated_new`` (%Gen) of those translations, which
  are target-language text (without parallel text: greedy continuations of the cloze contexts, target-language
  text too): what the "generated tokens per character" gate reads (counts, no clock);
- ``generation.same_text_token_saving``: 1 - the tokens the model generated / the tokens the source tokenizer needs
  for the same generated characters. ``tokens_per_character`` also moves with *what* a model writes (a candidate
  that copies more of the English sentence writes cheaper characters without using a new token); this one compares
  tokenizations of one text, so only the new tokens the model chose can raise it;
- ``bpb_ood_target`` / ``bpb_ood_source``: bits per byte on out-of-domain text (``evaluation.out_of_domain_text``,
  Debian's fortunes by default), which no model trained on (:mod:`platform.out_of_domain`; the run is refused
  before any work when it overlaps the training text): what the default bits-per-byte promotion gates read.

With several target languages (``target.languages``) every further language gets its own items from its own
held-out text and parallel pairs: its cloze and translation benchmarks carry its code already
(``benchmark.side_by_side_cloze_de.acc_bytes``), its generation measures are ``generation.<code>.<measure>``
(``generation.de.tokens_per_character``), and its out-of-domain bits per byte ``bpb_ood_target_<code>``. The first
language keeps the one-language names.

``score_model(..., item_parts=...)`` also returns each gated measure's per-item parts, which ``adapt`` logs as
``gates/items.json`` so ``vocadapt promote`` bootstraps the gates' intervals without scoring again.

The source model's values carry the ``source_model.`` prefix. Items are built once from held-out data and a seed:
same data and seed, same items.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vocadapt.components.evaluation.cloze import ClozeItem, build_cloze_items
from vocadapt.components.evaluation.prompts import first_line, translation_prompt
from vocadapt.pipelines.vocabulary_steps import on_scoring_device

if TYPE_CHECKING:
    from vocadapt.pipelines.recipe import Recipe

CLOZE_TASK = "side_by_side_cloze_{lang}"
TRANSLATION_TASK = "side_by_side_translation_{source}_{target}"


@dataclass
class SideBySideItems:
    """What every model is scored on."""

    language: str
    source_language: str
    cloze: list[ClozeItem]
    translation: list[dict[str, str]]  # {"prompt", "reference"}: source_language -> language
    out_of_domain: dict[str, list[str]] = field(default_factory=dict)  # {"target": [...], "source": [...]}
    max_new_tokens: int = 48
    max_length: int = 128
    batch_size: int = 8
    generation_scope: str = ""  # "" for the first target language; a further one's code: generation.<code>.*
    further: list[SideBySideItems] = field(default_factory=list)  # target.languages after the first


def generation_key(measure: str, scope: str = "") -> str:
    """``generation.<measure>`` for the first target language, ``generation.<scope>.<measure>`` for a further one."""
    return f"generation.{scope}.{measure}" if scope else f"generation.{measure}"


@dataclass(frozen=True)
class ItemSettings:
    """How many items of each task are drawn (with ``seed``: same data and seed, same items) and the sizes they
    are scored with."""

    items: int
    seed: int
    max_new_tokens: int = 48
    max_length: int = 128
    batch_size: int = 8


@dataclass(frozen=True)
class SourceVocabulary:
    """What a model's generated tokens are compared with: the source ``tokenizer`` (for
    ``generation.same_text_token_saving``) and the ``new_token_ids`` it lacks (for %Gen); either may be None."""

    tokenizer: Any = None
    new_token_ids: Any = None


def build_items(*, language: str, source_language: str, documents: list[str], settings: ItemSettings,
                parallel: tuple[Path, Path] | None = None,
                out_of_domain: dict[str, list[str]] | None = None) -> SideBySideItems:
    """Cloze items from ``documents`` (held-out target text) and one-shot translation prompts from the parallel
    files, (test pairs, pairs for the shot) (JSON lines with both language codes; none: no translation task)."""
    items, seed = settings.items, settings.seed
    cloze = build_cloze_items(documents, n_items=items, n_choices=4, min_words=8, seed=seed,
                              key_prefix=f"{language}-held-out")
    translation = []
    if parallel is not None:
        from vocadapt.components.input_files import read_jsonl

        parallel_test, parallel_shots = parallel

        pairs = [row for row in read_jsonl(parallel_test, "held-out parallel text")
                 if row.get(language, "").strip() and row.get(source_language)]
        shots = read_jsonl(parallel_shots, "parallel text for the one-shot example")
        rng = random.Random(seed)
        chosen = sorted(rng.sample(range(len(pairs)), min(items, len(pairs))))
        shot = rng.sample(shots, 1)
        translation = [{"prompt": translation_prompt(pairs[i][source_language], source_language, language, shot),
                        "reference": pairs[i][language]} for i in chosen]
    return SideBySideItems(language, source_language, cloze, translation, dict(out_of_domain or {}),
                           settings.max_new_tokens, settings.max_length, settings.batch_size)


def score_model(model, tokenizer, items: SideBySideItems, *, source: SourceVocabulary = SourceVocabulary(),
                prefix: str = "", item_parts: dict | None = None) -> dict[str, float]:
    """Every measure of the module doc for one model, named with ``prefix`` (``source_model.`` for the source);
    ``generation.same_text_token_saving`` needs ``source.tokenizer``, %Gen ``source.new_token_ids``. ``item_parts``, when given, receives each
    gated measure's per-item parts under the same name (``components/evaluation/bootstrap.py``'s ``ItemParts``:
    bits and bytes per out-of-domain document, 0/1 per cloze item, chrF statistics, tokens and characters per
    generation), from which the promotion gates bootstrap their intervals. Each of ``items.further`` (a further
    target language) is scored the same way under its own names."""
    import math

    from vocadapt.components.evaluation.bootstrap import ItemParts, item_id, ratio_parts
    from vocadapt.components.evaluation.cloze_scoring import score_cloze_items
    from vocadapt.components.evaluation.efficiency import generation_efficiency
    from vocadapt.components.evaluation.text_scores import chrf_statistics
    from vocadapt.components.metrics.bits_per_byte import score_documents
    from vocadapt.platform.evaluation.generation import TransformersBackend

    parts: dict[str, ItemParts] = {}
    # each part shows a progress bar: on a 2-core CPU without AMX the demo's scoring takes minutes per model
    scored_model = prefix.removesuffix(".").replace("_", " ") or "adapted model"
    if items.cloze:
        _, correct_bytes = score_cloze_items(model, tokenizer, items.cloze, batch_size=items.batch_size,
                                             progress=f"{scored_model}: cloze {items.language}")
        parts[f"benchmark.{CLOZE_TASK.format(lang=items.language)}.acc_bytes"] = ItemParts(
            "mean", correct_bytes, tuple(item_id(item.context) for item in items.cloze))
    backend = TransformersBackend(model, tokenizer, batch_size=items.batch_size)
    if items.translation:
        task = TRANSLATION_TASK.format(source=items.source_language, target=items.language)
        prompts = [item["prompt"] for item in items.translation]
        record = backend.generate(prompts, max_new_tokens=items.max_new_tokens)
        statistics = chrf_statistics([first_line(text) for text in record.texts],
                                     [item["reference"] for item in items.translation])
        parts[f"benchmark.{task}.chrf"] = ItemParts("chrf", statistics, tuple(map(item_id, prompts)))
    else:  # no parallel text: the model continues the cloze contexts, target-language text too
        prompts = [item.context for item in items.cloze]
        record = backend.generate(prompts, max_new_tokens=items.max_new_tokens)
    report = generation_efficiency(record, source.new_token_ids)
    prompt_ids = tuple(map(item_id, prompts))
    generation = lambda measure: generation_key(measure, items.generation_scope)  # noqa: E731
    parts[generation("tokens_per_character")] = ratio_parts([len(ids) for ids in record.token_ids],
                                                           [len(text) for text in record.texts], prompt_ids)
    metrics = {}
    if "percent_generated_new" in report:
        metrics[generation("percent_generated_new")] = report["percent_generated_new"]
    if source.tokenizer is not None:
        needed = [len(source.tokenizer(text, add_special_tokens=False)["input_ids"]) for text in record.texts]
        if sum(needed):
            parts[generation("same_text_token_saving")] = ratio_parts(
                [len(ids) for ids in record.token_ids], needed, prompt_ids, kind="saving")
        else:
            metrics[generation("same_text_token_saving")] = 0.0
    for stream, documents in items.out_of_domain.items():
        language = {"target": items.language, "source": items.source_language}.get(
            stream, stream.removeprefix("target_"))
        scored = score_documents(model, tokenizer, documents, max_length=items.max_length,
                                 batch_size=items.batch_size,
                                 progress=f"{scored_model}: {language} out-of-domain bits per byte")
        parts[f"bpb_ood_{stream}"] = ratio_parts([score.nats / math.log(2) for score in scored],
                                                 [score.bytes for score in scored], tuple(map(item_id, documents)))
    metrics |= {key: float(value.value()) for key, value in parts.items()}
    if item_parts is not None:
        item_parts.update({f"{prefix}{key}": value for key, value in parts.items()})
    scores = {f"{prefix}{key}": value for key, value in metrics.items()}
    for language_items in items.further:
        scores |= score_model(model, tokenizer, language_items, source=source, prefix=prefix, item_parts=item_parts)
    return scores


def items_for_config(config, inputs) -> SideBySideItems | None:
    """The items an ``adapt`` run scores (None with ``evaluation.side_by_side_items: 0``): cloze from the target
    validation text, translation from the embedded parallel test split (one shot from its validation split) when
    the corpora are the embedded ones, out-of-domain text as ``evaluation.out_of_domain_text`` declares it (the
    fortunes where Debian has them), for every target language: each further one of ``target.languages`` in
    ``further``, its own held-out text and parallel pairs (the out-of-domain text of every language is scored with
    the first's items, as ``bpb_ood_<stream>``)."""
    from vocadapt.platform.assets.out_of_domain import out_of_domain_for_config
    from vocadapt.platform.assets.sources import read_documents

    evaluation = config.evaluation
    if evaluation.side_by_side_items == 0:
        return None
    english = config.target.source_language
    validation = inputs.target_validation_by_language(config.target.language)
    embedded = inputs.embedded and config.corpus.train == "embedded"
    assets = None
    if embedded:
        from vocadapt.platform.assets.embedded import load_assets

        assets = load_assets(languages=tuple(validation))

    settings = ItemSettings(evaluation.side_by_side_items, config.seed, evaluation.max_new_tokens,
                            evaluation.max_length, evaluation.batch_size)

    def language_items(language: str, scope: str, out_of_domain: dict[str, list[str]]) -> SideBySideItems:
        parallel = None
        if assets is not None:
            parallel = assets.parallel(language, "test"), assets.parallel(language, "validation")
        built = build_items(language=language, source_language=english, documents=read_documents(validation[language]),
                            settings=settings, parallel=parallel, out_of_domain=out_of_domain)
        built.generation_scope = scope
        return built

    out_of_domain = out_of_domain_for_config(config)  # evaluation.out_of_domain_text, else the fortunes
    items = language_items(config.target.language, "", out_of_domain)
    items.further = [language_items(language, language, {}) for language in list(validation)[1:]]
    return items


def fertility_parts(source_tokenizer, target_tokenizer, documents: list[str], language: str) -> dict:
    """Per held-out document, the tokens of each tokenizer and the words (the fertility report's word rule): the
    parts of ``fertility.<source|target>_tokenizer.<lang>.tokens_per_word`` the fertility gate bootstraps over
    documents. {} where the script does not delimit words (no tokens per word to gate)."""
    from vocadapt.components.evaluation.bootstrap import item_id, ratio_parts
    from vocadapt.components.tokenizers.segmentation import segmentation_for

    segmentation = segmentation_for(language, documents)
    if not documents or not segmentation.words_delimited:
        return {}
    words = [segmentation.count_words([document]) for document in documents]
    ids = tuple(map(item_id, documents))
    return {f"fertility.{name}_tokenizer.{language}.tokens_per_word":
            ratio_parts([len(row) for row in tokenizer(documents, add_special_tokens=False)["input_ids"]], words, ids)
            for name, tokenizer in (("source", source_tokenizer), ("target", target_tokenizer))}


def score_source_model(recipe: Recipe, item_parts: dict[str, Any]) -> dict[str, float]:
    """The source model's scores on the side-by-side benchmark (``source_model.*`` on the parent run, where the
    promotion gates read them, their per-item parts added to ``item_parts``); {} when
    ``evaluation.side_by_side_items`` is 0."""
    if recipe.side_by_side is None:
        return {}
    with recipe.stage("evaluation"), on_scoring_device(recipe.config, recipe.source_model):
        scores = score_model(recipe.source_model, recipe.source_tokenizer, recipe.side_by_side,
                             source=SourceVocabulary(recipe.source_tokenizer), prefix="source_model.",
                             item_parts=item_parts)
    recipe.tracker.log_metrics(recipe.parent_id, scores)
    recipe.console.print("  source model: " + ", ".join(f"{k.removeprefix('source_model.')}={v:.3f}"
                                                        for k, v in scores.items()), highlight=False)
    return scores


def score_adapted_model(model, tokenizer, source_tokenizer, items, item_parts=None) -> dict[str, float]:
    """A method's final model on the side-by-side benchmark (per-item parts into ``item_parts``); %Gen counts the
    tokens the source vocabulary lacks."""
    from vocadapt.components.tokenizers.overlap import new_token_ids
    source = SourceVocabulary(source_tokenizer, new_token_ids(source_tokenizer, tokenizer))
    return score_model(model, tokenizer, items, source=source, item_parts=item_parts)


def equal_content_speed_up(config, adapted, source, documents: list[str], scope: str = "") -> dict[str, float]:
    """The adapted model's decoding speed-up over the source model on the same held-out target-language text
    (``components/evaluation/decode_timing.py``): ``generation.{scope}equal_content_speed_up`` (source seconds over
    adapted seconds) and ``generation.{scope}equal_content_token_ratio`` (source tokens over adapted tokens), the
    scope empty for the first target language and ``<code>.`` for each further one; {} when
    ``evaluation.equal_content_characters`` is 0 or there is no held-out text."""
    from vocadapt.components.evaluation.decode_timing import compare_on_documents

    ratios = compare_on_documents(adapted, source, documents, characters=config.evaluation.equal_content_characters,
                                  repeats=config.evaluation.equal_content_repeats)
    if not ratios:
        return {}
    return {f"generation.{scope}equal_content_speed_up": ratios["speed_up"],
            f"generation.{scope}equal_content_token_ratio": ratios["token_ratio"]}
