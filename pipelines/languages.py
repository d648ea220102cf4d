"""The language matrix: how much each target language gains from a vocabulary of its own.

For every language (default: the papers' languages that the embedded corpora cover, de el hi it ja tr vi, and km
as the low-resource non-Latin case), top to bottom:

1. corpus size after language filtering, from the assets manifest;
2. three tokenizers: SmolLM2's own; a target tokenizer trained on the language (kind by script,
   ``tokenizer_settings_for``) that replaces the vocabulary; SmolLM2's expanded with the k = 1,000 most frequent
   new tokens of that target tokenizer ("0.01GB" §3), keeping the tokenization of English held-out lines and, as
   ``vocadapt adapt`` does, of the embedded English word list (every casing, alone and after a space);
3. language-aware fertility and parity of each on held-out paragraphs, parity against their English side as
   SmolLM2 tokenizes it ("Design choices" §5.1);
4. zero-shot held-out bits per byte of the source model and of the replaced model initialised with ``fvt`` and
   with ``random`` (no training);
5. generation speed-up of the ``fvt`` model over the source model on target-language prompts, measured side by
   side (characters per second), and the speed-up at equal content: both models decode the same held-out text
   teacher-forced with their KV cache, in turn, median of repeats (the one a zero-shot model can show).

Tracked in MLflow: one parent run, one child per language (tags name the language and its script); the table is
written as markdown and JSON to the output folder and logged with the parent run.
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from vocadapt.pipelines.language_report import markdown_table, row_metrics, write_outputs

MATRIX_LANGUAGES = ("de", "el", "hi", "it", "ja", "tr", "vi", "km")
REFERENCE_LANGUAGE = "en"


@dataclass(frozen=True)
class MatrixSettings:
    """Sizes of every measurement; defaults fit a 2-core CPU (one SmolLM2 forward of 8 x 128 takes seconds)."""

    vocab_size: int = 16384  # target tokenizer, as the Italian demo
    # the same training budget for every language (de and it have 55k lines with their Bibles, hi 4k); None: all
    tokenizer_training_lines: int | None = 20000
    expansion_k: int = 1000  # "0.01GB" §7.4 sweeps k in {50 ... 5000}
    expansion_ranking_lines: int = 5000  # training lines on which candidate tokens are ranked by frequency
    protect_lines: int = 200  # English held-out lines whose tokenization expansion must not change
    # an English word list whose words (every casing, alone and after a space) keep their tokenization too, as
    # adapt's tokenizer.protect_lexicon: "embedded" (the assets' lexicons/en.txt; the lines alone, with a note,
    # where none was built), a file (one word per line), or None for the lines alone
    protect_lexicon: str | None = "embedded"
    fertility_documents: int = 500  # held-out paragraph pairs for fertility and parity
    bpb_documents: int = 24  # held-out paragraphs for zero-shot bits per byte
    max_length: int = 128
    batch_size: int = 8
    generation_prompts: int = 4
    max_new_tokens: int = 16
    # equal-content decoding: the same held-out text (up to this many characters) decoded teacher-forced with the KV
    # cache by both models, in turn, median of the repeats (components/evaluation/decode_timing.py)
    equal_content_characters: int = 400
    equal_content_repeats: int = 3
    seed: int = 0
    # bounds of the corpus expectation suite on each language's training text (adapt's corpus.* defaults)
    corpus_min_lines: int = 100
    corpus_min_language_share: float = 0.8
    corpus_max_duplicate_share: float = 0.2

    @classmethod
    def quick(cls) -> MatrixSettings:
        """A smoke run: smaller tokenizers and fewer documents and prompts, every cell still measured."""
        return cls(vocab_size=4096, tokenizer_training_lines=3000, expansion_ranking_lines=1000, protect_lines=50,
                   fertility_documents=100, bpb_documents=8, generation_prompts=4, max_new_tokens=8)


@dataclass(frozen=True)
class LanguageCorpus:
    """What the matrix reads for one language.

    Attributes:
        train_files: target-language training text, one paragraph per line (tokenizer training, ranking).
        pairs: held-out (target paragraph, English paragraph) pairs, line-aligned.
        size: lines per split after filtering and what was dropped (the manifest's entry), for the table.
    """

    language: str
    train_files: tuple[Path, ...]
    pairs: list[tuple[str, str]]
    size: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EnglishLexicon:
    """The English word list expansion protects besides the held-out lines.

    Attributes:
        words: the listed words, each protected in every casing, alone and after a space; empty for none.
        name: the file they came from (``en.txt`` for the embedded list), for the record; None for none.
        note: why there is none although one was asked for.
    """

    words: tuple[str, ...] = ()
    name: str | None = None
    note: str | None = None
    guard: Any = None  # the words' ProtectedWords under the source tokenizer, built once for every language


def with_guard(lexicon: EnglishLexicon, source_tokenizer) -> EnglishLexicon:
    """The lexicon with its expansion guard built (6 s for the 174,344-word list on an idle machine): once per
    matrix, not per language; each language adds its own English lines to it."""
    from dataclasses import replace

    from vocadapt.components.tokenizers.expand import protected_source_text

    if not lexicon.words:
        return lexicon
    return replace(lexicon, guard=protected_source_text(source_tokenizer, [], lexicon.words))


@dataclass
class MatrixResult:
    rows: list[dict[str, Any]]
    markdown: str
    output_dir: Path
    parent_run_id: str
    tracking_uri: str


def embedded_language_corpus(assets, language: str, split: str = "validation") -> LanguageCorpus:
    """A language's corpus from the embedded assets: train split, held-out parallel pairs, manifest sizes."""
    entry = assets.manifest["corpora"][language]
    dropped = entry.get("dropped", {})
    size = {
        "lines": dict(entry.get("lines", {})),
        "dropped_language_id": int(dropped.get("language_id", {}).get("total", 0)),
        "dropped_duplicates": int(dropped.get("duplicates", 0)),
        "dropped_identical_to_english": int(dropped.get("identical_to_english", 0)),
        "sources": list(entry.get("sources", [])),
    }
    return LanguageCorpus(language, (assets.corpus(language, "train"),), read_pairs(assets.parallel(language, split),
                                                                                    language), size)


def read_pairs(path: Path, language: str, reference: str = REFERENCE_LANGUAGE) -> list[tuple[str, str]]:
    """(target, English) pairs of a parallel jsonl file ({"<lang>": ..., "en": ...} per line), non-empty only."""
    pairs = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                record = json.loads(line)
                if record.get(language, "").strip() and record.get(reference, "").strip():
                    pairs.append((record[language], record[reference]))
    return pairs


def english_lexicon(named: str | None) -> EnglishLexicon:
    """The word list ``MatrixSettings.protect_lexicon`` names; an empty one with a note where "embedded" was asked
    for and none was built, a UserError for a file that does not exist."""
    from vocadapt.platform.assets.sources import word_list_path

    path = word_list_path(named, REFERENCE_LANGUAGE, "protect_lexicon")
    if path is None:
        note = None if named is None else ("no embedded English word list (lexicons/en.txt, built by `vocadapt "
                                           "assets`): expansion protects the English held-out lines alone")
        return EnglishLexicon(note=note)
    return EnglishLexicon(tuple(path.read_text(encoding="utf-8").split()), path.name)


@dataclass
class MatrixContext:
    """What every language of a matrix is measured against and with: the source model and its tokenizer, the
    settings, the working folder (one sub-folder per language), the console and the English word list."""

    source_model: Any
    source_tokenizer: Any
    settings: MatrixSettings
    workdir: Path
    console: Console
    lexicon: EnglishLexicon = field(default_factory=EnglishLexicon)


def run_language_matrix(
    corpora: list[LanguageCorpus],
    source_model_dir: Path,
    output_dir: Path,
    tracker,
    *,
    settings: MatrixSettings | None = None,
    console: Console | None = None,
) -> MatrixResult:
    """Measure every language, track each as a child run, write ``languages.md`` and ``languages.json``."""
    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer
    from vocadapt.platform.config import ExperimentConfig
    from vocadapt.platform.data.corpus_checks import log_expectations
    from vocadapt.platform.model_loading import load_source_model

    settings = settings or MatrixSettings()
    console = console or Console()
    expectations = _check_corpora(corpora, settings)
    lexicon = english_lexicon(settings.protect_lexicon)
    if lexicon.note:
        console.print(f"[yellow]note:[/] {lexicon.note}")
    source_tokenizer = load_pretrained_tokenizer(str(source_model_dir))
    lexicon = with_guard(lexicon, source_tokenizer)
    source_model = load_source_model(ExperimentConfig(target={"language": "en"}), str(source_model_dir))  # float32, no remote code
    rows: list[dict[str, Any]] = []
    workdir = Path(tempfile.mkdtemp(prefix="vocadapt-languages-"))
    context = MatrixContext(source_model, source_tokenizer, settings, workdir, console, lexicon)
    try:
        with tracker.run("languages", tags={"vocadapt.matrix": "languages"}) as parent:
            parent_id = parent.info.run_id
            tracker.log_params(parent_id, {**asdict(settings), "languages": ",".join(c.language for c in corpora),
                                           "source_model": str(source_model_dir)})
            log_expectations(tracker, parent_id, expectations)
            for corpus in corpora:
                console.rule(f"[bold]{corpus.language}")
                row = measure_language(corpus, context)
                _track_language(tracker, parent_id, row)
                rows.append(row)
                shutil.rmtree(workdir / corpus.language, ignore_errors=True)
                markdown = markdown_table(rows, settings)
                write_outputs(output_dir, rows, markdown)  # after each language: a long run shows progress
            tracker.log_text(parent_id, markdown, "languages.md")
            tracker.log_dict(parent_id, {"settings": asdict(settings), "rows": rows}, "languages.json")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    console.print(markdown)
    return MatrixResult(rows, markdown, output_dir, parent_id, tracker.tracking_uri)


def measure_language(corpus: LanguageCorpus, context: MatrixContext) -> dict[str, Any]:
    """Every cell of one language's row (JSON-ready); ``context.lexicon``: English words the expansion protects
    too."""
    from vocadapt.components.tokenizers.language_settings import describe_settings, tokenizer_settings_for
    from vocadapt.components.tokenizers.segmentation import segmentation_for

    settings, console, lexicon = context.settings, context.console, context.lexicon
    source_model, source_tokenizer = context.source_model, context.source_tokenizer
    language = corpus.language
    pairs = corpus.pairs[: settings.fertility_documents]
    documents, english = [target for target, _ in pairs], [reference for _, reference in pairs]
    segmentation = segmentation_for(language, documents)
    tokenizer_settings = tokenizer_settings_for(language)
    console.print(f"  tokenizer: {describe_settings(language, tokenizer_settings)}; words: {segmentation.rule}")
    replacement, expansion = _target_tokenizers(corpus, context, tokenizer_settings, english)
    protection = {"english_lines": len(english[: settings.protect_lines]), "word_list": lexicon.name,
                  "word_list_words": len(lexicon.words), "note": lexicon.note}
    word_list = f" and the word list {lexicon.name} ({len(lexicon.words):,} words)" if lexicon.name else " alone"
    console.print(f"  expanded by {len(expansion.new_token_ids):,} tokens, protecting {protection['english_lines']} "
                  f"English lines{word_list}; skipped: {expansion.skipped or 'none'}", highlight=False)  # fmt: skip
    fertility = _fertility(source_tokenizer, replacement, expansion, pairs, segmentation)
    for label, report in fertility.items():
        console.print(f"  {label}: {report['tokens_per_character']:.3f} tokens/char, parity {report['parity']:.2f}")
    bpb, fvt_model = _zero_shot_bits_per_byte(source_model, source_tokenizer, replacement, documents, settings,
                                              corpus)
    console.print("  bits per byte: " + ", ".join(f"{k} {v:.3f}" for k, v in bpb.items()))
    generation = _generation_speed_up(context, (fvt_model, replacement.tokenizer), documents, fertility)
    del fvt_model
    console.print(f"  speed-up (fvt over source): {generation['speed_up.characters_per_second']:.2f}x chars/s "
                  f"measured, {generation['speed_up.equal_content']:.2f}x at equal content")
    return {
        "language": language,
        "script": segmentation.script,
        "segmentation": segmentation.rule,
        "words_delimited": segmentation.words_delimited,
        "tokenizer": {**tokenizer_settings, "vocab_size": len(replacement.tokenizer),
                      "new_tokens": len(replacement.new_token_ids),
                      "expansion_added": len(expansion.new_token_ids), "expansion_skipped": expansion.skipped},
        "protection": protection,
        "corpus": corpus.size,
        "fertility": fertility,
        "bits_per_byte": bpb,
        "generation": generation,
    }


def _check_corpora(corpora: list[LanguageCorpus], settings: MatrixSettings) -> dict[str, Any]:
    """Enough held-out pairs, training files present, then the corpus expectation suite on each language's
    training text; raises before any run or file exists. Returns the suite's results, to log with the matrix."""
    from vocadapt.components.errors import UserError
    from vocadapt.platform.data.corpus_checks import (CorpusSplit, LineBounds, raise_for_failed_expectations,
                                                      run_expectation_suite)

    if not corpora:
        raise UserError("no languages to measure; pass --lang XX (e.g. --lang hi --lang ja)")
    for corpus in corpora:
        if len(corpus.pairs) < settings.bpb_documents:
            raise UserError(
                f"{corpus.language}: only {len(corpus.pairs)} held-out paragraph pairs, fewer than the "
                f"{settings.bpb_documents} bits per byte needs; build more text (vocadapt assets --lang "
                f"{corpus.language}) or lower bpb_documents"
            )
        missing = [str(path) for path in corpus.train_files if not Path(path).is_file()]
        if missing:
            raise UserError(f"{corpus.language}: training file(s) missing: {', '.join(missing)}; run vocadapt assets")
    splits = [CorpusSplit(f"{corpus.language} training", tuple(corpus.train_files), corpus.language,
                          settings.corpus_min_lines) for corpus in corpora]
    bounds = LineBounds(min_share=settings.corpus_min_language_share,
                        max_duplicate_share=settings.corpus_max_duplicate_share)
    results = run_expectation_suite(splits, bounds, seed=settings.seed)
    fields = {"min_lines": "MatrixSettings.corpus_min_lines", "max_line_chars": "the 20,000-character line bound",
              "max_duplicate_share": "MatrixSettings.corpus_max_duplicate_share",
              "min_language_share": "MatrixSettings.corpus_min_language_share", "language": "--lang"}
    raise_for_failed_expectations(results, fields)
    return results


def _target_tokenizers(corpus: LanguageCorpus, context: MatrixContext, tokenizer_settings, english: list[str]):
    """The replaced vocabulary and SmolLM2's vocabulary expanded with the trained tokenizer's top-k tokens, keeping
    the tokenization of the English lines and of the lexicon's words (trained under ``<workdir>/<language>``)."""
    from vocadapt.components.tokenizers.expand import expand_with_top_k, protected_source_text
    from vocadapt.components.tokenizers.replace import replace_vocabulary
    from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, iter_corpus_lines, train_tokenizer

    source_tokenizer, settings, lexicon = context.source_tokenizer, context.settings, context.lexicon
    workdir = context.workdir / corpus.language
    spec = TokenizerTrainingSpec(vocab_size=settings.vocab_size, max_lines=settings.tokenizer_training_lines,
                                 seed=settings.seed, like=source_tokenizer, **tokenizer_settings)
    trained = train_tokenizer(list(corpus.train_files), spec, workdir / "tokenizer", show_progress=False)
    replacement = replace_vocabulary(source_tokenizer, trained)
    ranking = list(iter_corpus_lines(list(corpus.train_files), settings.expansion_ranking_lines))
    # the word list's guard (built once per matrix by with_guard, here if it was not) and this language's lines
    protect = protected_source_text(source_tokenizer, english[: settings.protect_lines])
    if lexicon.words:
        protect = (lexicon.guard or with_guard(lexicon, source_tokenizer).guard) | protect
    expansion = expand_with_top_k(source_tokenizer, trained, ranking, settings.expansion_k, protect=protect)
    return replacement, expansion


def _fertility(source_tokenizer, replacement, expansion, pairs: list[tuple[str, str]], segmentation):
    """Reports of the source, replaced and expanded tokenizers on the held-out ``pairs`` (target paragraph,
    English paragraph); parity against English under the source's. ``segmentation`` names the language."""
    from vocadapt.components.tokenizers.fertility import ParallelText
    from vocadapt.components.tokenizers.language_fertility import LanguageDocuments, language_fertility_report

    documents, english = [target for target, _ in pairs], [reference for _, reference in pairs]

    contenders = {
        "source": (source_tokenizer, None),
        "target": (replacement.tokenizer, replacement.new_token_ids),
        "expanded": (expansion.tokenizer, expansion.new_token_ids),
    }
    text = LanguageDocuments(documents, segmentation.language, reference=ParallelText(english, source_tokenizer),
                             segmentation=segmentation)
    return {
        label: language_fertility_report(tokenizer, text, new_token_ids=new_ids, name=label).as_dict()
        for label, (tokenizer, new_ids) in contenders.items()
    }  # fmt: skip


def _zero_shot_bits_per_byte(source_model, source_tokenizer, replacement, documents, settings, corpus):
    """Held-out bits per byte of the source model and of the fvt- and random-initialised replaced models.

    Returns the scores and the fvt model (kept for the generation measurement).
    """
    from vocadapt.components.metrics.bits_per_byte import bits_per_byte
    from vocadapt.components.surgery import Initialisation, RowLayout, adapt_embeddings

    held_out = documents[: settings.bpb_documents]
    options = dict(max_length=settings.max_length, batch_size=settings.batch_size)
    scores = {"source": bits_per_byte(source_model, source_tokenizer, held_out, **options)}
    fvt_model = None
    for method in ("fvt", "random"):
        model = adapt_embeddings(
            copy.deepcopy(source_model),
            Initialisation(method, seed=settings.seed, corpus_files=[str(p) for p in corpus.train_files]),
            source_tokenizer=source_tokenizer, target_tokenizer=replacement.tokenizer,
            layout=RowLayout("replace", target_to_source=replacement.target_to_source,
                             new_target_ids=replacement.new_token_ids),
        ).eval()  # fmt: skip
        scores[method] = bits_per_byte(model, replacement.tokenizer, held_out, **options)
        if method == "fvt":
            fvt_model = model
        else:
            del model
    return scores, fvt_model


def _generation_speed_up(context: MatrixContext, adapted, documents: list[str], fertility) -> dict[str, float]:
    """Greedy generation on target-language prompts (the first half of held-out paragraphs), both models: the
    source model and ``adapted`` (model, tokenizer)."""
    from vocadapt.components.evaluation.decode_timing import compare_on_documents
    from vocadapt.components.evaluation.efficiency import generation_efficiency, speed_up
    from vocadapt.platform.evaluation.generation import TransformersBackend

    settings, (source_model, source_tokenizer), (model, tokenizer) = (
        context.settings, (context.source_model, context.source_tokenizer), adapted)
    prompts = [document[: max(len(document) // 2, 1)] for document in documents[: settings.generation_prompts]]
    reports = {}
    for label, candidate, candidate_tokenizer in (("source", source_model, source_tokenizer),
                                                  ("fvt", model, tokenizer)):
        backend = TransformersBackend(candidate, candidate_tokenizer, batch_size=settings.batch_size)
        backend.generate(prompts[:1], max_new_tokens=2)  # warm-up: first-call allocations are not generation
        record = backend.generate(prompts, max_new_tokens=settings.max_new_tokens)
        reports[label] = generation_efficiency(record)
    ratios = speed_up(reports["fvt"], reports["source"])
    # Tokens the two tokenizers need for the same held-out paragraphs: what makes an adapted model finish sooner
    # once it writes the language (a zero-shot model's own output is not yet target-language text).
    token_ratio = fertility["source"]["tokens"] / max(fertility["target"]["tokens"], 1)
    # Measured, not derived: both models decode the same held-out text token by token with their KV cache, in turn
    # (a ratio of two free-running generation rates times the token ratio multiplied the noise of both).
    equal_content = compare_on_documents((model, tokenizer), (source_model, source_tokenizer),
                                         documents[: settings.generation_prompts],
                                         characters=settings.equal_content_characters,
                                         repeats=settings.equal_content_repeats)["speed_up"]
    flat = {f"{label}.{key}": value for label, report in reports.items() for key, value in report.items()}
    return flat | {f"speed_up.{rate}": value for rate, value in ratios.items()} | {
        "speed_up.equal_content": equal_content, "source_over_target_tokens": token_ratio}


def _track_language(tracker, parent_id: str, row: dict[str, Any]) -> None:
    language = row["language"]
    tags = {"vocadapt.target_language": language, "vocadapt.script": row["script"],
            "vocadapt.segmentation": row["segmentation"], "vocadapt.tokenizer_kind": row["tokenizer"]["kind"]}
    with tracker.run(f"languages/{language}", parent_run_id=parent_id, tags=tags) as child:
        run_id = child.info.run_id
        params = {f"tokenizer.{k}": v for k, v in row["tokenizer"].items()}
        params |= {f"protection.{k}": v for k, v in row.get("protection", {}).items()}  # rows before it had none
        tracker.log_params(run_id, {"language": language, **params})
        tracker.log_metrics(run_id, row_metrics(row))
        tracker.log_dict(run_id, row, "language.json")


__all__ = ["MATRIX_LANGUAGES", "EnglishLexicon", "LanguageCorpus", "MatrixResult", "MatrixSettings",
           "embedded_language_corpus", "english_lexicon", "markdown_table", "measure_language", "read_pairs",
           "row_metrics", "run_language_matrix"]
