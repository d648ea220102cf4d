"""What the source tokenizer never joins, read from its vocabulary: the expansion guard for numbers and symbols.

A word list protects words, not numbers: a target tokenizer trained on Italian text learns ``Ġ2``, ``10`` and
``Ġ«``, and a source that never joins digits (SmolLM2 has no multi-digit token) would then tokenize every English
number, date and version differently once they are appended. No list of documents can enumerate every number, so
the rule is read from the source vocabulary instead: a new token may only hold what some source token holds.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from vocadapt.components.tokenizers._backend import scheme_of
from vocadapt.components.tokenizers.canonical import canonical_piece, canonical_tokens

LETTER, DIGIT, SPACE, SYMBOL, PARTIAL = "letter", "digit", "space", "symbol", "partial"


def character_class(character: str) -> str:
    """letter (and combining marks), digit (any Unicode number), space, symbol (punctuation, signs, controls), or
    partial: one byte of a character cut in the middle (a byte-level intermediate such as the first byte of 'è')."""
    if "\udc80" <= character <= "\udcff":  # surrogateescape's stand-in for a byte that is no whole character
        return PARTIAL
    if character.isspace():
        return SPACE
    category = unicodedata.category(character)
    if category[0] in "LM":
        return LETTER
    return DIGIT if category[0] == "N" else SYMBOL


def _runs(text: str) -> list[str]:
    """Maximal runs of two or more characters that are digits, spaces or symbols."""
    runs, current = [], ""
    for character in text:
        if character_class(character) in (DIGIT, SPACE, SYMBOL):
            current += character
            continue
        if len(current) > 1:
            runs.append(current)
        current = ""
    return runs + ([current] if len(current) > 1 else [])


class SourceSplits:
    """The joins the source vocabulary holds, and a test of whether a new token makes one it never makes.

    A new token is refused when its text (decoded from the model's alphabet, a word start as a space)
    - puts side by side two character classes (letter, digit, space, symbol) that no source token puts side by side:
      a source without multi-digit tokens never joins two digits, nor a space and a digit;
    - or holds a run of two or more digits, spaces or symbols that is not the whole text of a source token: the
      source's own merges decide how such runs split (``...``, ``\\n\\n``), and a new merge on two of its pieces
      (a fourth newline after ``ĊĊĊ``, ``Ġ20`` + ``24``) would change how English text holding that run is split.

    Merges appended after every existing one fire only on a source segmentation, so a token that passes both checks
    neither joins classes the source never joins nor re-splits a run of digits, spaces and symbols. It may still
    join a symbol run the source holds to letters (``Ġ(`` + ``il``) where the source joins those classes itself;
    words next to symbols are left to the protected text and word list.
    """

    def __init__(self, source_tokenizer: Any):
        self.scheme = scheme_of(source_tokenizer)
        self.class_pairs: set[tuple[str, str]] = set()
        self.symbol_runs: set[str] = set()
        for form in canonical_tokens(source_tokenizer):
            if form is None or form.special:
                continue
            text = form.text_bytes.decode("utf-8", "surrogateescape")
            classes = [character_class(character) for character in text]
            self.class_pairs.update(zip(classes, classes[1:]))
            if all(kind in (DIGIT, SPACE, SYMBOL) for kind in classes):
                self.symbol_runs.add(text)

    def refuses(self, piece: str) -> str | None:
        """Why the new token ``piece`` (in the model's alphabet) would join what the source keeps apart, or None."""
        text = canonical_piece(piece, self.scheme).text_bytes.decode("utf-8", "surrogateescape")
        classes = [character_class(character) for character in text]
        for left, right in zip(classes, classes[1:]):
            if PARTIAL not in (left, right) and (left, right) not in self.class_pairs:
                return f"joins {left} and {right}, which no source token does"
        for run in _runs(text):
            if run not in self.symbol_runs:
                return f"re-splits {run!r}, a run of digits, spaces or symbols no source token holds"
        return None
