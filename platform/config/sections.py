"""The experiment config's sections, one pydantic model per concern, every field described: the source model, the
target languages, the corpus, the tokenizer, the initialisers, evaluation, the merge back into a chat model and
tracking. The LAPT and DeepSpeed sections and the shared base class are in ``platform/config/lapt_sections.py``; the rules
that span several sections are ``ExperimentConfig``'s (``experiment.py``). Imports nothing heavy.
"""

from __future__ import annotations

import difflib
from typing import Any, Literal

from pydantic import Field, field_validator, model_serializer, model_validator

from vocadapt.components.merging.settings import MergeSettings

from vocadapt.platform.config.lapt_sections import Section as _Section

EMBEDDED_MODEL = "embedded:smollm2-135m"
EMBEDDED_CORPUS = "embedded"


class SourceSection(_Section):
    model: str = Field(
        EMBEDDED_MODEL,
        description="Source model: a local directory, a hub name (mistralai/Mistral-7B-v0.1) or "
        f"'{EMBEDDED_MODEL}' for the embedded default built by `vocadapt assets`.",
    )
    revision: str | None = Field(None, description="Hub revision (branch, tag or commit) of the source model.")
    trust_remote_code: bool = Field(
        False, description="Run the model repository's own code. Off unless this config opts in by name."
    )
    dtype: Literal["float32", "bfloat16", "float16"] = Field("float32", description="Weights dtype for loading.")


class TargetSection(_Section):
    """One target language (``language``) or several in one model (``languages``); give one of the two. Once
    validated, ``languages`` always lists every target language and ``language`` is the first of them (the primary
    language: the output folder's and the registered model's name, and what single-language steps read)."""

    language: str | None = Field(
        None, min_length=2, description="ISO 639-1 code of the target language (fastText lid.176 label): it, hi, "
        "ja... The one-language form of languages (language: it means languages: [it]); give one of the two.",
    )
    languages: list[str] | None = Field(
        None, min_length=1, description="Several target languages adapted into one model, e.g. [it, de, ru]: "
        "expansion splits tokenizer.expand_top_k across them (tokenizer.budget_rule), replacement trains one "
        "tokenizer on their balanced mix, LAPT mixes every language with the source language, and fertility and "
        "bits per byte are reported per language. The first is the primary language. Give this or language.",
    )
    source_language: str = Field("en", description="Language of the source model, kept as the forgetting check.")

    @field_validator("language", "source_language")
    @classmethod
    def _checkable(cls, language: str | None) -> str | None:
        """A code fastText's lid.176 labels (after dropping a region: pt-br -> pt), or no corpus could be checked."""
        return None if language is None else _checkable_language(language)

    @field_validator("languages")
    @classmethod
    def _checkable_list(cls, languages: list[str] | None) -> list[str] | None:
        if languages is None:
            return None
        for language in languages:
            _checkable_language(language)
        twice = sorted({language for language in languages if languages.count(language) > 1})
        if twice:
            raise ValueError(f"{', '.join(twice)} listed twice in target.languages {languages}; list each language "
                             "once")
        return languages

    @model_validator(mode="after")
    def _one_form(self) -> TargetSection:
        if self.language is not None and self.languages is not None:
            raise ValueError(f"both target.language ({self.language!r}) and target.languages ({self.languages}) are "
                             f"given; give one: target.languages: {_union(self.language, self.languages)} for "
                             "several languages, or target.language alone for one")
        if self.language is None and self.languages is None:
            raise ValueError("no target language: give target.language (one ISO 639-1 code, e.g. it) or "
                             "target.languages (a list, e.g. [it, de, ru])")
        languages = self.languages or [self.language]
        if self.languages is not None and self.source_language in languages:
            raise ValueError(f"target.source_language {self.source_language!r} is also a target language "
                             f"({languages}); the source language is kept, not adapted to: drop it from the list")
        object.__setattr__(self, "languages", list(languages))
        object.__setattr__(self, "language", languages[0])
        return self

    @property
    def multilingual(self) -> bool:
        """Several target languages."""
        return len(self.languages or ()) > 1

    @model_serializer(mode="wrap")
    def _one_form_out(self, handler):
        """Dumped in the one form it was validated from, so a dumped config validates again: ``language`` for one
        language, ``languages`` for several."""
        dumped = handler(self)
        if isinstance(dumped, dict):
            dumped.pop("languages" if not self.multilingual else "language", None)
        return dumped


def _checkable_language(language: str) -> str:
    from vocadapt.components.language_id import LID_LABELS, fasttext_label

    if fasttext_label(language) not in LID_LABELS:
        close = difflib.get_close_matches(language.lower(), sorted(LID_LABELS), n=3)
        raise ValueError(f"{language!r} is not a language code vocadapt can check corpora in; give an ISO 639 "
                         f"code of fastText's lid.176 ({', '.join(close) or 'it, hi, ja, de...'})")
    return language


def _union(language: str, languages: list[str]) -> list[str]:
    return [language, *(other for other in languages if other != language)]


class LanguageCorpus(_Section):
    train: list[str] = Field(..., min_length=1, description="Training text files of this language (one "
                             "document per line).")
    validation: list[str] = Field(..., min_length=1, description="Held-out files of this language.")


class CorpusSection(_Section):
    train: list[str] | Literal["embedded"] = Field(
        EMBEDDED_CORPUS,
        description="Target-language training text files (one document per line), or 'embedded' for the "
        "corpora built by `vocadapt assets`.",
    )
    validation: list[str] | None = Field(None, description="Held-out target-language files (embedded: automatic).")
    languages: dict[str, LanguageCorpus] = Field(
        default_factory=dict, description="With target.languages and corpus files: the files of each language "
        "after the first, {de: {train: [...], validation: [...]}} (train and validation are the first's). "
        "Unused with corpus.train: embedded.",
    )
    source_language_train: list[str] | None = Field(None, description="Source-language training files for mixing.")
    source_language_validation: list[str] | None = Field(None, description="Held-out source-language files.")
    min_language_share: float = Field(
        0.8, ge=0.0, le=1.0, description="Least share of lines fastText must label as the target language."
    )
    min_lines: int = Field(100, ge=1, description="Least number of non-empty lines a training corpus must have.")
    language_check_lines: int = Field(2000, ge=10, description="Lines sampled for the language-id check.")
    max_duplicate_share: float = Field(
        0.2, ge=0.0, le=1.0, description="Most share of repeated lines a corpus may have (expectation suite)."
    )
    max_line_chars: int = Field(20000, ge=1, description="Longest line, in characters, a corpus may have.")
    expectation_lines: int | None = Field(
        200_000, ge=10, description="Lines per corpus the expectation suite validates: a seeded sample where a "
        "corpus has more (None: all). The embedded Italian and English corpora (120k lines) take 1.3 to 4 s on 2 cores.",
    )


class TokenizerSection(_Section):
    kind: Literal["auto", "bytelevel-bpe", "spm-bpe", "spm-unigram", "wordpiece"] = Field(
        "auto", description="Kind of target tokenizer to train; 'auto' chooses by the target language's script "
        "(byte-level BPE for alphabets, sentencepiece BPE with byte fallback for CJK, spaceless scripts and "
        "abugidas such as Devanagari, with character coverage 0.9995 where the alphabet is large).",
    )
    vocab_size: int = Field(16384, ge=256, description="Target vocabulary size.")
    pretrained: str | None = Field(
        None, description="Use this existing target tokenizer instead of training one: a folder with tokenizer "
        "files or a hub name (SAVA §3: Minerva-3B's, with that model as init.helper). kind, vocab_size, "
        "min_frequency and max_training_lines are then unused; it is loaded without remote code.",
    )
    min_frequency: int = Field(2, ge=1, description="Least frequency of a merge or piece.")
    max_training_lines: int | None = Field(None, ge=1, description="Cap on lines used to train it (None: all).")
    expand_top_k: int | None = Field(
        None, ge=1, description="With init.mode=expand: add only the k most frequent new tokens on the corpus "
        "('0.01GB' §3: 50 to 5,000); None appends the whole new vocabulary ΔV ('Design choices' §3.1).",
    )
    trim_min_count: int | None = Field(
        None, ge=1, description="With init.mode=trim: keep the tokens seen at least this often in the target- and "
        "source-language training text (default 1 when trim_size is unset)."
    )
    trim_size: int | None = Field(
        None, ge=1, description="With init.mode=trim: keep the most frequent tokens, with the bytes, specials and "
        "the pieces they are built from, up to this many in all (instead of trim_min_count)."
    )
    budget_rule: Literal["gain", "saving", "even"] = Field(
        "gain", description="With target.languages and init.mode=expand: how expand_top_k new tokens are split "
        "across the languages (components/tokenizers/budget.py). 'gain': in decreasing tokens saved per word of "
        "each language's corpus per id the token takes with its intermediates; 'saving': the same, every token "
        "counted as one id; 'even': languages take turns, k/n tokens each.",
    )
    protect_lines: int = Field(
        20000, ge=0, description="With init.mode=expand: source-language training lines whose tokenization must "
        "not change (merges that would change them are not added).",
    )
    protect_lexicon: str | None = Field(
        "embedded", description="With init.mode=expand: a source-language word list whose words (every casing, "
        "with and without a leading space) must keep their tokenization, so unseen source-language text does too. "
        "'embedded': the word list `vocadapt assets` builds for the source language (English: Debian's "
        "wamerican-large + wbritish-large), skipped with a note where there is none; a file path (one word per "
        "line); or null for none.",
    )


class InitSection(_Section):
    methods: list[str] = Field(["random", "fvt"], min_length=1, description="Initialisers to run, by name.")
    mode: Literal["replace", "expand", "trim"] = Field(
        "replace", description="Replace the vocabulary, expand it, or trim it to the tokens the target- and "
        "source-language training text uses (every kept row copied; no tokenizer is trained; list one method)."
    )
    helper: str | None = Field(
        None, description="Helper for methods that need one: 'fasttext' (skip-gram trained on the target "
        "training corpus tokenized with the target tokenizer; options after a colon, e.g. "
        "'fasttext:max_lines=20000,dim=100': max_lines, the corpus lines it trains on, at most 500,000 by default, "
        "bounds its time; dim, epoch, min_count, minn, maxn, ws), a model directory or hub name that uses the target "
        "tokenizer, or a static vectors file."
    )
    options: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per-method keyword arguments, e.g. {sava: {solver: sgd}}."
    )

    @field_validator("methods")
    @classmethod
    def _unique(cls, methods: list[str]) -> list[str]:
        if len(set(methods)) != len(methods):
            raise ValueError(f"methods are listed twice: {methods}; list each once")
        return methods


class EvaluationSection(_Section):
    max_documents: int = Field(200, ge=1, description="Held-out documents per language for bits per byte.")
    max_length: int = Field(256, ge=16, description="Longest sequence, in tokens, scored at once.")
    batch_size: int = Field(8, ge=1, description="Sequences per forward pass.")
    side_by_side_items: int = Field(
        24, ge=0, description="Items of the side-by-side benchmark scored for the source model and every method "
        "(pipelines/side_by_side.py): target-language cloze (acc_bytes) and, with the embedded parallel corpora, "
        "one-shot translation into the target language (chrF, and the tokens per character and %Gen of what the "
        "model generates, which the promotion gates read). 0: skip it (the benchmark and generation gates then "
        "have nothing to read)."
    )
    max_new_tokens: int = Field(48, ge=1, description="Longest greedy generation of the side-by-side benchmark.")
    equal_content_characters: int = Field(
        400, ge=0, description="Characters of held-out target-language text that the source model and every "
        "method's final model decode token by token with their KV cache, teacher-forced, batch 1, in turn: the "
        "generation speed-up at equal content (generation.equal_content_speed_up, beside the token ratio "
        "generation.equal_content_token_ratio), which free-running generation cannot give because each model "
        "writes its own text. 0: skip it."
    )
    equal_content_repeats: int = Field(3, ge=1, description="Turns of the equal-content timing; the median counts.")
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="Where adapt scores the models (held-out bits per byte, the side-by-side benchmark, "
        "the equal-content decode), in float32 either way: auto is the first CUDA device when torch sees one, "
        "else the CPU; cuda without one is refused before any work. A model moves there to be scored and back "
        "(the source model is initialised from on the CPU)."
    )
    out_of_domain: bool = Field(
        True, description="Also score bits per byte on out-of-domain text that no model trains on (Debian's "
        "fortunes, downloaded once; Italian, German, Russian and English): a held-out split of the training "
        "corpora flatters an adapted model. Metrics bpb_ood_target / bpb_ood_source, and bpb_ood_target_<code> for "
        "each further language of target.languages."
    )
    out_of_domain_text: dict[str, Literal["fortunes"] | list[str]] = Field(
        default_factory=dict, description="Out-of-domain text per language code, what the default bits-per-byte "
        "promotion gates read: 'fortunes' (Debian's fortune cookies; vocadapt reads them for it, de, ru and en) "
        "or a list of files (one paragraph per line) from a source that no training stream and no tokenizer "
        "training has seen. A language not listed gets the fortunes where Debian has them, else none (with one "
        "target language its bits-per-byte gate then reports the metric missing; with target.languages the run "
        "is refused before any work, since every language is gated). Up to out_of_domain_documents paragraphs are "
        "scored per language, in a seeded order. "
        "Before "
        "any work, a run whose out-of-domain paragraphs equal or nearly duplicate a training paragraph is "
        "refused (see out_of_domain_max_jaccard)."
    )
    out_of_domain_documents: int = Field(
        200, ge=1, description="Out-of-domain paragraphs per language scored for bits per byte (what the default "
        "bits-per-byte gates read; max_documents bounds the held-out split). At 200 fortunes the paired 95% "
        "interval of the difference between SmolLM2 and its bf16-rounded copy is +-0.0003 bits per byte, about a "
        "third of its width at 32 (BENCHMARKS.md, 'Noise in the gates'); between the demo's candidate and SmolLM2 "
        "it is about +-0.025 at 200 and +-0.014 at 800, and the first 200 fortunes alone put the candidate 0.010 "
        "ahead where all 800 put it 0.011 behind (docs/benchmarks/demo.md): raise it where a gate must be decided."
    )
    out_of_domain_max_jaccard: float = Field(
        0.5, gt=0.0, le=1.0, description="Out-of-domain paragraphs are refused when, after normalising case, "
        "whitespace and punctuation, one equals a paragraph of the training text (corpus and LAPT files, which "
        "the tokenizer also trains on) or their character 5-gram Jaccard similarity reaches this bound "
        "(components/corpora/overlap.py). The embedded corpora against the fortunes: at most 0.27."
    )


class MergeSection(MergeSettings, _Section):
    """The ``merge`` section: ElChat's post-hoc merge of each method's adapted model back into the source chat model
    (components/merging/elchat.py), after LAPT and the head fit, before evaluation and registration."""


class TrackingSection(_Section):
    experiment: str = Field("vocadapt", description="MLflow experiment name.")
    tracking_uri: str | None = Field(
        None, description="MLflow tracking URI; default: $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db here."
    )
    registered_model: str | None = Field(
        None, description="Registry name for the best model; default vocadapt-<lang>-<source model short name>."
    )
    register_best: bool = Field(True, description="Register the best method's model with alias 'candidate'.")
    energy: bool = Field(
        True, description="Measure each stage's energy and CO2 with codecarbon (offline, no files written) and log "
        "energy.<stage>.kwh and emissions.<stage>.kg_co2eq; false skips the measurement."
    )
    country_iso_code: str = Field(
        "ITA", pattern=r"^[A-Z]{3}$",
        description="ISO 3166-1 alpha-3 code of the country whose grid powers the machine (ITA, FRA, USA...); it "
        "sets the carbon intensity behind the CO2 figures. Offline, so nothing can look it up. Default ITA: the "
        "shipped configs adapt to Italian and SAVA's Appendix C, the figures compared against, is on Italy's grid.",
    )
