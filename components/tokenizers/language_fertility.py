"""Fertility that knows the language: per character, per byte and per paragraph for every script, tokens per word
only where words are delimited (with the rule stated), and parity against the English side of the same paragraphs.

Parity follows "Design choices" §5.1 (after Petrov et al. 2023): the tokens a tokenizer needs for the target
paragraphs over the tokens needed for the same paragraphs in English. By default the English side is tokenized by
the same tokenizer; give ``LanguageDocuments`` a ``reference=ParallelText(english, source_tokenizer)`` to compare
against English as the source model reads it (what the language matrix does, so a replaced tokenizer's parity says
how much more the same content costs than it costs the original model in English).

This wraps :func:`vocadapt.components.tokenizers.fertility.fertility_report`, whose ``words`` are whitespace
splits; here they are replaced by :class:`~vocadapt.components.tokenizers.segmentation.Segmentation`'s count.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from vocadapt.components.tokenizers.fertility import ParallelText, fertility_report
from vocadapt.components.tokenizers.segmentation import Segmentation, segmentation_for


@dataclass(frozen=True)
class LanguageFertilityReport:
    """One tokenizer on one language's paragraphs (special tokens not counted).

    ``tokens_per_paragraph`` is the average tokens per document ("Design choices" §4.4 sequence length);
    ``words`` and ``tokens_per_word`` are None where the script does not delimit words (``segmentation`` says
    what rule was used); ``parity`` is ``tokens / reference_tokens`` on the line-aligned reference paragraphs.
    """

    tokenizer: str
    language: str
    script: str
    segmentation: str
    words_delimited: bool
    documents: int
    characters: int
    bytes: int
    tokens: int
    words: int | None
    tokens_per_character: float
    tokens_per_byte: float
    bytes_per_token: float
    characters_per_token: float
    tokens_per_paragraph: float
    tokens_per_word: float | None
    byte_fallback_rate: float
    unknown_rate: float
    reference_language: str | None = None
    reference_tokens: int | None = None
    parity: float | None = None
    new_token_share: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready (None where not measured or not defined)."""
        return asdict(self)

    def metrics(self) -> dict[str, float]:
        """The numeric measures only (for MLflow): None and text fields left out."""
        return {
            key: float(value)
            for key, value in self.as_dict().items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)
        }


@dataclass(frozen=True)
class LanguageDocuments:
    """Paragraphs of one language to measure tokenizers on, with what fertility needs to know about them."""

    documents: Sequence[str]  # one paragraph per string
    language: str  # their language code: decides the script and the word rule
    reference: ParallelText | None = None  # the same paragraphs in the reference language, line-aligned, for parity
    segmentation: Segmentation | None = None  # the word rule; None: ``segmentation_for(language, documents)``


def language_fertility_report(
    tokenizer: Any,
    text: LanguageDocuments,
    *,
    new_token_ids: Iterable[int] | None = None,
    batch_size: int = 512,
    name: str | None = None,
) -> LanguageFertilityReport:
    """Measure a tokenizer on ``text``, paragraphs of one language.

    Args:
        tokenizer: a transformers fast tokenizer or a ``tokenizers.Tokenizer``.
        text: the paragraphs, their language and, optionally, the reference paragraphs and the word rule.
        new_token_ids: ids of the new vocabulary for the share of new tokens.
        batch_size, name: as :func:`fertility_report`.

    Raises:
        ValueError: no documents, or reference documents that are not line-aligned.
    """
    documents, language, reference = list(text.documents), text.language, text.reference
    base = fertility_report(
        tokenizer, documents, reference=reference, new_token_ids=new_token_ids, batch_size=batch_size, name=name,
    )  # fmt: skip
    segmentation = text.segmentation or segmentation_for(language, documents)
    words = segmentation.count_words(documents)
    return LanguageFertilityReport(
        tokenizer=base.tokenizer,
        language=language,
        script=segmentation.script,
        segmentation=segmentation.rule,
        words_delimited=segmentation.words_delimited,
        documents=base.documents,
        characters=base.characters,
        bytes=base.bytes,
        tokens=base.tokens,
        words=words,
        tokens_per_character=base.tokens_per_character,
        tokens_per_byte=base.tokens_per_byte,
        bytes_per_token=base.bytes_per_token,
        characters_per_token=base.characters / max(base.tokens, 1),
        tokens_per_paragraph=base.tokens_per_document,
        tokens_per_word=base.tokens / max(words, 1) if words is not None else None,
        byte_fallback_rate=base.byte_fallback_rate,
        unknown_rate=base.unknown_rate,
        reference_language=reference.language if reference is not None else None,
        reference_tokens=base.reference_tokens,
        parity=base.parity,
        new_token_share=base.new_token_share,
    )


def language_fertility_table(tokenizers: dict[str, Any], text: LanguageDocuments,
                             **options) -> dict[str, LanguageFertilityReport]:
    """One report per named tokenizer on the same paragraphs, one segmentation for all (options as above)."""
    segmentation = text.segmentation or segmentation_for(text.language, list(text.documents))
    text = replace(text, segmentation=segmentation)
    return {label: language_fertility_report(tokenizer, text, name=label, **options)
            for label, tokenizer in tokenizers.items()}
