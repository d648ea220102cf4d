"""Which target tokenizer suits a language's script, as keyword arguments for ``TokenizerTrainingSpec``.

- Scripts without spaces between words (Japanese, Chinese, Thai, Lao, Khmer, Myanmar, Tibetan/Dzongkha):
  sentencepiece BPE, which needs no pre-tokenization on spaces ("Design choices" §3.1 trains a BPE sentencepiece
  tokenizer), with character coverage 0.9995 (sentencepiece's advice for rich character sets) and byte
  fallback, so the 0.05% rarest characters still encode as ``<0xNN>`` pieces instead of ``<unk>``.
  A byte-level BPE pre-tokenizes on spaces and punctuation, so a spaceless paragraph becomes one huge pre-token
  and merges learned across words.
- Abugidas with combining vowel signs (Devanagari, Tamil, Bengali, ...): sentencepiece BPE too, with coverage 1.0
  (small alphabets). The GPT-2 pre-tokenizer regex of byte-level BPE splits words at every vowel sign, so no merge
  spans a syllable (measured on the embedded Hindi corpus: byte-level BPE asked for 16,384 tokens stops at 1,316,
  0.684 tokens per character; sentencepiece BPE 0.223; see ``segmentation.COMBINING_MARK_SCRIPTS``).
- Every other script: byte-level BPE, the kind SmolLM2, GPT-2 and Llama-3 use (bytes cover every character).

An explicit ``kind`` is respected; for sentencepiece kinds the coverage still follows the script (1.0 for small
alphabets, where every character is frequent enough to keep).
"""

from __future__ import annotations

from typing import Any

from vocadapt.components.tokenizers.segmentation import (
    COMBINING_MARK_SCRIPTS,
    LARGE_ALPHABET_SCRIPTS,
    SPACELESS_SCRIPTS,
    script_for_language,
)
from vocadapt.components.tokenizers.train import KINDS

AUTO = "auto"
RICH_CHARACTER_COVERAGE = 0.9995
FULL_CHARACTER_COVERAGE = 1.0


def tokenizer_settings_for(language: str, kind: str | None = None) -> dict[str, Any]:
    """Keyword arguments for ``TokenizerTrainingSpec`` that suit ``language``'s script: ``kind`` and, for
    sentencepiece kinds, ``character_coverage`` (sentencepiece kinds always train with byte fallback).

    Args:
        language: ISO 639-1 code ("hi", "ja", "km", "zh-cn").
        kind: one of ``train.KINDS`` to force a kind, or None / "auto" to choose by script.

    Raises:
        ValueError: an unknown kind.
    """
    if kind is not None and kind != AUTO and kind not in KINDS:
        raise ValueError(f"unknown tokenizer kind {kind!r}; choose one of {', '.join(KINDS)} or {AUTO!r}")
    script = script_for_language(language)
    spaceless = script in SPACELESS_SCRIPTS
    if kind in (None, AUTO):
        kind = "spm-bpe" if spaceless or script in COMBINING_MARK_SCRIPTS else "bytelevel-bpe"
    settings: dict[str, Any] = {"kind": kind}
    if kind.startswith("spm"):
        rich = spaceless or script in LARGE_ALPHABET_SCRIPTS
        settings["character_coverage"] = RICH_CHARACTER_COVERAGE if rich else FULL_CHARACTER_COVERAGE
    return settings


def describe_settings(language: str, settings: dict[str, Any]) -> str:
    """One line for reports: "ja (Japanese): spm-bpe, character coverage 0.9995, byte fallback"."""
    parts = [settings["kind"]]
    if "character_coverage" in settings:
        parts += [f"character coverage {settings['character_coverage']}", "byte fallback"]
    elif settings["kind"] == "bytelevel-bpe":
        parts.append("bytes as the base alphabet")
    return f"{language} ({script_for_language(language)}): " + ", ".join(parts)
