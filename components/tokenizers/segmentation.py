"""Scripts and word segmentation: which writing system a text uses, and whether its words can be counted.

Tokens per whitespace word (Rust et al. 2021) is meaningless for scripts written without spaces between words:
a Japanese or Chinese paragraph is one "word", Thai, Lao, Myanmar and Tibetan (Dzongkha) put spaces only between
phrases or sentences. For those, fertility is reported per character, per byte and per paragraph, and parity
against the English side of the same paragraphs; tokens per word only where words are delimited.

Khmer is written without spaces too, but the LibreOffice translations mark word boundaries with U+200B ZERO WIDTH
SPACE (the embedded km corpus: 182,363 U+200B and 56,160 spaces in 1.3 M characters, one boundary per 5.5
characters). So a spaceless script counts as delimited when the text itself carries U+200B boundaries at least
once every ``MAX_CHARACTERS_PER_WORD`` characters; the rule used is stated in every report.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

ZERO_WIDTH_SPACE = "\u200b"

# Scripts written without spaces between words (Unicode script names as unicodedata spells them).
SPACELESS_SCRIPTS = frozenset({"Han", "Hiragana", "Katakana", "Japanese", "Thai", "Lao", "Khmer", "Myanmar",
                               "Tibetan"})
# Abugidas: a vowel sign or virama (Unicode categories Mn / Mc) inside every other syllable. GPT-2's pre-tokenizer
# regex (``\p{L}+``), which byte-level BPE uses, cuts words at each of them, so merges never span a syllable:
# on the embedded Hindi corpus a 16,384-token byte-level BPE stops at 1,316 tokens (0.684 tokens per character,
# parity 3.25) where sentencepiece BPE reaches 11,916 (0.223 tokens per character, parity 1.06).
COMBINING_MARK_SCRIPTS = frozenset({"Devanagari", "Bengali", "Gurmukhi", "Gujarati", "Oriya", "Tamil", "Telugu",
                                    "Kannada", "Malayalam", "Sinhala", "Thai", "Lao", "Khmer", "Myanmar",
                                    "Tibetan"})
# Scripts whose character set is large enough that sentencepiece should not cover every character
# (sentencepiece's README: 0.9995 "for languages with rich character set like Japanese or Chinese").
LARGE_ALPHABET_SCRIPTS = frozenset({"Han", "Hiragana", "Katakana", "Japanese", "Hangul"})

# The script each of the embedded languages (and the papers' languages) is written in. Japanese mixes Han and
# kana, so it gets its own name; Chinese variants are Han.
LANGUAGE_SCRIPTS = {
    "ar": "Arabic", "bn": "Bengali", "bo": "Tibetan", "dz": "Tibetan", "el": "Greek", "fa": "Arabic",
    "he": "Hebrew", "hi": "Devanagari", "hy": "Armenian", "ja": "Japanese", "ka": "Georgian", "km": "Khmer",
    "ko": "Hangul", "lo": "Lao", "mr": "Devanagari", "my": "Myanmar", "ne": "Devanagari", "ru": "Cyrillic",
    "si": "Sinhala", "ta": "Tamil", "te": "Telugu", "th": "Thai", "uk": "Cyrillic", "ur": "Arabic",
    "zh": "Han", "zh-cn": "Han", "zh-tw": "Han", "zh-hans": "Han", "zh-hant": "Han",
}  # fmt: skip
DEFAULT_SCRIPT = "Latin"  # every other language code the platform knows (de, en, it, tr, vi, ...)

# A "word" longer than this many characters on average is a phrase: the delimiters do not mark words.
MAX_CHARACTERS_PER_WORD = 12

_WHITESPACE_WORDS = re.compile(r"\S+")
_ZWSP_OR_WHITESPACE_WORDS = re.compile(r"[^\s\u200b]+")
# Spaced scripts whose spaces do not separate words exactly.
_SPACED_RULES = {"vi": "whitespace-separated syllables (Vietnamese puts spaces between syllables, not words)"}
# unicodedata names that do not start with the script's own name.
_NAME_PREFIXES = {"CJK": "Han", "HALFWIDTH": None, "FULLWIDTH": None, "KATAKANA-HIRAGANA": "Katakana"}


@dataclass(frozen=True)
class Segmentation:
    """How words are found in a language's text, stated so reports can say what "word" meant.

    Attributes:
        language: the language code asked for (None when only the text was given).
        script: the Unicode script ("Latin", "Devanagari", "Japanese", "Khmer", ...).
        spaces_between_words: the script puts spaces between words.
        words_delimited: words can be counted (by spaces, or by U+200B in a spaceless script).
        rule: the counting rule in words, e.g. "whitespace-separated words" or "not delimited: ...".
    """

    language: str | None
    script: str
    spaces_between_words: bool
    words_delimited: bool
    rule: str

    def count_words(self, documents: Iterable[str]) -> int | None:
        """Words in the documents under this segmentation's rule; None where words are not delimited."""
        if not self.words_delimited:
            return None
        pattern = _WHITESPACE_WORDS if self.spaces_between_words else _ZWSP_OR_WHITESPACE_WORDS
        return sum(len(pattern.findall(document)) for document in documents)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@lru_cache(maxsize=65536)
def script_of_character(character: str) -> str | None:
    """The Unicode script of a letter or combining mark ("Latin", "Han", "Khmer"); None for anything else."""
    if not unicodedata.category(character).startswith(("L", "M")):
        return None
    name = unicodedata.name(character, "")
    words = name.split()
    if not words:
        return None
    first = words[0]
    if first in _NAME_PREFIXES:
        script = _NAME_PREFIXES[first]
        if script is None and len(words) > 1:  # "HALFWIDTH KATAKANA LETTER A": the second word is the script
            return words[1].capitalize()
        return script
    return first.capitalize()


def detect_script(documents: Iterable[str], *, max_characters: int = 200_000) -> str:
    """The script most letters of the documents are written in; Han mixed with kana is "Japanese".

    Raises:
        ValueError: the documents hold no letters at all.
    """
    counts: Counter[str] = Counter()
    seen = 0
    for document in documents:
        for character in document:
            script = script_of_character(character)
            if script is not None:
                counts[script] += 1
        seen += len(document)
        if seen >= max_characters:
            break
    if not counts:
        raise ValueError("cannot tell the script of text without letters; pass the language code instead")
    kana = counts["Hiragana"] + counts["Katakana"]
    if kana and kana >= 0.05 * sum(counts.values()):
        counts["Japanese"] = counts.pop("Han", 0) + counts.pop("Hiragana", 0) + counts.pop("Katakana", 0)
    return counts.most_common(1)[0][0]


def script_for_language(language: str) -> str:
    """The script a language code is written in (``LANGUAGE_SCRIPTS``, else Latin)."""
    return LANGUAGE_SCRIPTS.get(language.lower(), DEFAULT_SCRIPT)


def is_spaceless(language: str) -> bool:
    """True for languages whose script puts no spaces between words (ja, zh, th, km, my, dz, ...)."""
    return script_for_language(language) in SPACELESS_SCRIPTS


def segmentation_for(language: str | None = None, documents: Sequence[str] | None = None) -> Segmentation:
    """How to count words in a language's text.

    The script comes from the language code, or from the documents when no code is given. A spaced script counts
    whitespace-separated words. A spaceless script counts words only if ``documents`` mark word boundaries with
    U+200B at least once every ``MAX_CHARACTERS_PER_WORD`` characters (Khmer in the embedded corpora); without
    documents, or without such marks, its words are not delimited and tokens per word is not reported.
    """
    if language is None and not documents:
        raise ValueError("segmentation needs a language code or some documents to detect the script from")
    script = script_for_language(language) if language else detect_script(documents or ())
    if script not in SPACELESS_SCRIPTS:
        rule = _SPACED_RULES.get(language or "", "whitespace-separated words")
        return Segmentation(language, script, True, True, rule)
    if documents and _zero_width_spaces_mark_words(documents):
        rule = "words separated by U+200B ZERO WIDTH SPACE or whitespace (the text marks word boundaries)"
        return Segmentation(language, script, False, True, rule)
    rule = (f"not delimited: {script} is written without spaces between words, so tokens per word is not "
            "reported; see tokens per character, per byte and per paragraph, and parity")
    return Segmentation(language, script, False, False, rule)


def _zero_width_spaces_mark_words(documents: Sequence[str]) -> bool:
    """U+200B (with whitespace) splits the text into pieces of at most ``MAX_CHARACTERS_PER_WORD`` on average."""
    boundaries = sum(document.count(ZERO_WIDTH_SPACE) for document in documents)
    if boundaries == 0:
        return False
    pieces = sum(len(_ZWSP_OR_WHITESPACE_WORDS.findall(document)) for document in documents)
    characters = sum(len(re.sub(r"[\s\u200b]", "", document)) for document in documents)
    return pieces > 0 and characters / pieces <= MAX_CHARACTERS_PER_WORD
