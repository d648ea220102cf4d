"""BPE on one pre-token, and the merges that make a new token reachable (without them, BPE never emits it).

A BPE tokenizer applies, over and over, the highest-priority merge among adjacent symbols (lowest rank, then
leftmost), exactly as ``tokenizers``' BPE does. A new token appended to a vocabulary is produced only if merges
lead to it from the pieces the tokenizer already produces for its text; ``plan_merges`` finds the binary tree
over those pieces that needs the fewest new intermediate tokens, and ``MergeTable`` replays BPE in Python so
each addition can be checked before it is kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from vocadapt.components.collector import collector_paused

UNKNOWN = "\x00unknown"  # a character outside the vocabulary: never merged (sentencepiece byte-falls back on it)


def merge_pair(entry: str | Sequence[str]) -> tuple[str, str]:
    """A merge as stored in tokenizer.json: "a b" (older files) or ["a", "b"] (newer, may contain spaces)."""
    if isinstance(entry, str):
        left, right = entry.split(" ", 1)
        return left, right
    left, right = entry
    return left, right


@dataclass
class MergeTable:
    """The merges of a BPE model, in priority order, plus the vocabulary; extended as tokens are added."""

    vocab: set[str]
    ranks: dict[tuple[str, str], int]
    ignore_merges: bool = False
    added: list[tuple[str, str]] = field(default_factory=list)

    @classmethod
    def from_model(cls, model: dict) -> MergeTable:
        with collector_paused():  # a tuple per merge, 262K for Gemma-3's (components/collector.py)
            merges = [merge_pair(entry) for entry in model.get("merges", [])]
            ranks: dict[tuple[str, str], int] = {}
            for rank, pair in enumerate(merges):
                ranks.setdefault(pair, rank)
            return cls(set(model["vocab"]), ranks, bool(model.get("ignore_merges", False)))

    def encode_word(self, word: str) -> list[str]:
        """The pieces of one pre-token (already in the model's alphabet: byte-level or '▁' spelling)."""
        if self.ignore_merges and word in self.vocab:
            return [word]
        symbols = [character if character in self.vocab else UNKNOWN for character in word]
        while len(symbols) > 1:
            best_rank, best_index = min(
                (self.ranks.get((left, right), _NEVER), index)
                for index, (left, right) in enumerate(zip(symbols, symbols[1:]))
            )
            if best_rank == _NEVER:
                break
            symbols[best_index : best_index + 2] = [symbols[best_index] + symbols[best_index + 1]]
        return symbols

    def append(self, left: str, right: str) -> None:
        """Add a merge after every existing one (lowest priority), unless it exists already."""
        if (left, right) not in self.ranks:
            self.ranks[(left, right)] = _APPENDED + len(self.added)
            self.added.append((left, right))

    def rollback(self, added_length: int, tokens: Sequence[str]) -> None:
        """Forget merges appended after ``added_length`` and the given tokens (an addition that did not verify)."""
        for pair in self.added[added_length:]:
            del self.ranks[pair]
        del self.added[added_length:]
        self.vocab.difference_update(tokens)


_NEVER = float("inf")
_APPENDED = 1 << 40  # ranks of appended merges start here: after every merge a real tokenizer can have


def plan_merges(pieces: Sequence[str], known: set[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """Merges that combine ``pieces`` into one token, building the fewest tokens not in ``known``.

    Args:
        pieces: what the tokenizer produces now for the new token's text, shape ``(n,)``, n >= 2.
        known: the vocabulary (source plus tokens added so far).

    Returns:
        ``(merges, new_intermediates)``: merges in the order to append them (children before parents, the full
        token last), and the intermediate tokens (excluding the full token) that must be added before it.
    """
    n = len(pieces)
    spans = {(i, i + 1): (0, None) for i in range(n)}  # (i, j) -> (new tokens below, best split)
    for length in range(2, n + 1):
        for start in range(0, n - length + 1):
            end = start + length
            options = []
            for cut in range(start + 1, end):
                cost = spans[(start, cut)][0] + spans[(cut, end)][0]
                cost += _is_new(pieces, start, cut, known) + _is_new(pieces, cut, end, known)
                options.append((cost, abs((cut - start) - (end - cut)), cut))  # fewest new, then balanced
            best = min(options)
            spans[(start, end)] = (best[0], best[2])
    merges: list[tuple[str, str]] = []
    intermediates: list[str] = []

    def emit(start: int, end: int, top: bool = False) -> str:
        """The token of pieces[start:end], its merges appended children first (the best split of ``spans``)."""
        if end - start == 1:
            return pieces[start]
        cut = spans[(start, end)][1]
        left, right = emit(start, cut), emit(cut, end)
        merges.append((left, right))
        token = left + right
        if not top and token not in known and token not in intermediates:
            intermediates.append(token)
        return token

    emit(0, n, top=True)
    return merges, intermediates


def _is_new(pieces: Sequence[str], start: int, end: int, known: set[str]) -> int:
    return int(end - start > 1 and "".join(pieces[start:end]) not in known)


class ProtectedWords:
    """Pre-tokens of source-language text whose tokenization must not change as tokens are added.

    Merges appended after every existing one fire only once no existing merge applies, that is on a word's
    original segmentation. So a new merge (l, r) changes a protected word exactly when l and r are adjacent in the
    word's original pieces; a new single-character token changes words holding that character (they were byte
    pieces or unknown); with ``ignore_merges`` a new token that is a whole protected word changes it. Additions
    that pass this check leave every protected word as it was, so the original pieces stay the reference and
    the check is a set lookup per merge, however large the protected text (a lexicon of a million entries).

    Args:
        segmentations: each protected pre-token and the pieces the source tokenizer gives it.
        ignore_merges: the tokenizer takes a pre-token that is in the vocabulary whole (Llama-3).
    """

    def __init__(self, segmentations: Iterable[tuple[str, Sequence[str]]], *, ignore_merges: bool = False):
        self.words: set[str] = set()
        self.pairs: set[tuple[str, str]] = set()
        self.characters: set[str] = set()
        self.ignore_merges = ignore_merges
        for word, pieces in segmentations:
            self.words.add(word)
            self.characters.update(word)
            self.pairs.update(zip(pieces, pieces[1:]))

    def __or__(self, other: ProtectedWords) -> ProtectedWords:
        """Both guards in one: a word list's, built once, with each expansion's own documents."""
        if self.ignore_merges != other.ignore_merges:
            raise ValueError("protected words of tokenizers with and without ignore_merges cannot be combined")
        union = ProtectedWords((), ignore_merges=self.ignore_merges)
        union.words, union.pairs = self.words | other.words, self.pairs | other.pairs
        union.characters = self.characters | other.characters
        return union

    def changed_by(self, merges: Iterable[tuple[str, str]], tokens: Iterable[str], characters: Iterable[str]) -> bool:
        """Whether appending ``merges`` (new ones only) and ``tokens`` would change a protected word."""
        if any(pair in self.pairs for pair in merges) or any(c in self.characters for c in characters):
            return True
        return self.ignore_merges and any(token in self.words for token in tokens)
