"""One token budget split across several target languages: which new tokens an expansion adds, in what order.

Each language brings its candidate new tokens (those of a tokenizer trained on that language that the source lacks,
:func:`language_candidates`), each with its count on that language's corpus and the number of source tokens its
text takes now. :func:`rank_candidates` orders the candidates of every language into one list; the expansion
(``expand.expand_vocabulary(..., max_new_tokens=k)``) walks that list until k ids are added, so a candidate the
expansion must skip (it would change protected English text, or join digits) is replaced by the next one in the list
and the k ids are always spent. Two rules:

- ``gain`` (the default): greedy by marginal gain per id spent. A candidate's saving in one language is the
  source tokens it saves there, ``count x (source_pieces - 1)``, divided by that language's corpus word count:
  the drop in that language's tokens per word (fertility) if the token is added, so a large corpus does not
  outweigh a small one. A token that several languages share (a name, a Latin-script word two languages use)
  sums its savings over them and is listed once. Its cost is the ids it takes: itself and the intermediate
  tokens its merges need (``costs``; 1 where not given). A token of a script the source barely knows
  (Cyrillic in SmolLM2) saves many tokens but needs several intermediates first; dividing by the cost keeps it
  from taking ids that would lower the other languages' fertility more. Candidates are taken in decreasing
  saving per id, so each id goes where it lowers the sum of the languages' fertilities most.
  Both numbers are estimates made before the expansion (a token containing another chosen one saves less once
  both are in; intermediates are shared between tokens): the expansion itself is exact, only the order is
  estimated. ``multilingual.expand_for_languages`` measures the costs with one expansion along the saving order.
- ``saving``: the same without the cost (every token counted as one id).
- ``even``: an even split. Languages take turns, each its next most frequent candidate not taken yet (the
  per-language order of ``expand_with_top_k``), so each of n languages gets k/n of the ids (the first languages
  listed one more where k is not a multiple of n).

Pure: counts come in, an order comes out; :func:`language_candidates` does the counting with the tokenizers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from vocadapt.components.errors import UserError
from vocadapt.components.tokenizers.canonical import CanonicalToken

BUDGET_RULES = ("gain", "saving", "even")
BudgetRule = Literal["gain", "saving", "even"]


@dataclass(frozen=True)
class Candidate:
    """A new token of one language: its count on that language's corpus (under the language's own tokenizer) and
    the source tokens its text takes now (at least 1)."""

    token: CanonicalToken
    count: int
    source_pieces: int

    @property
    def saved(self) -> int:
        """Source tokens saved on the corpus if this token is added: each occurrence becomes one token."""
        return self.count * max(self.source_pieces - 1, 0)


@dataclass(frozen=True)
class LanguageCandidates:
    """One language's candidates, most frequent first, and the word count of the corpus they were counted on."""

    language: str
    candidates: tuple[Candidate, ...]
    words: int


@dataclass(frozen=True)
class RankedCandidate:
    """A candidate in the combined order: its gain (summed over the languages that have it) and the language
    where it gains most (what :func:`allocation` counts it for)."""

    token: CanonicalToken
    gain: float
    language: str
    gains: tuple[tuple[str, float], ...]


def rank_candidates(languages: Sequence[LanguageCandidates], rule: BudgetRule = "gain",
                    costs: Mapping[CanonicalToken, int] | None = None) -> list[RankedCandidate]:
    """Every language's candidates in one order, each token once (see the module's docstring for the rules).
    ``costs``: ids each token takes with its intermediates (rule ``gain``; 1 where not given)."""
    if rule not in BUDGET_RULES:
        raise UserError(f"budget rule {rule!r} is not one of {', '.join(BUDGET_RULES)}; use one of those")
    if not languages:
        raise UserError("no languages to split a token budget across; give at least one language's candidates")
    names = [entry.language for entry in languages]
    if len(set(names)) != len(names):
        raise UserError(f"languages listed twice in {names}; give each language's candidates once")
    for entry in languages:
        if entry.words < 1:
            raise UserError(f"{entry.language}: its corpus has no words to normalise gains by; give it text")
    gains: dict[CanonicalToken, dict[str, float]] = {}
    for entry in languages:
        for candidate in entry.candidates:
            per_language = gains.setdefault(candidate.token, {})
            per_language[entry.language] = per_language.get(entry.language, 0.0) + candidate.saved / entry.words

    def ranked(token: CanonicalToken) -> RankedCandidate:
        per_language = gains[token]
        best = max(per_language, key=lambda language: (per_language[language], -names.index(language)))
        return RankedCandidate(token, sum(per_language.values()), best, tuple(per_language.items()))

    if rule in ("gain", "saving"):
        first_seen = {token: position for position, token in enumerate(gains)}  # ties: the order given
        cost = (lambda token: max(int((costs or {}).get(token, 1)), 1)) if rule == "gain" else (lambda token: 1)
        order = sorted(gains, key=lambda token: (-sum(gains[token].values()) / cost(token), first_seen[token]))
        return [ranked(token) for token in order]
    order: list[tuple[CanonicalToken, str]] = []  # an even split counts a token for the language whose turn took it
    taken: set[CanonicalToken] = set()
    queues = [iter(entry.candidates) for entry in languages]
    active = list(range(len(queues)))
    while active:
        for index in list(active):
            candidate = next((c for c in queues[index] if c.token not in taken), None)
            if candidate is None:
                active.remove(index)
                continue
            taken.add(candidate.token)
            order.append((candidate.token, names[index]))
    return [RankedCandidate(token, sum(gains[token].values()), language, tuple(gains[token].items()))
            for token, language in order]


def allocation(ranked: Sequence[RankedCandidate], k: int, languages: Sequence[str]) -> dict[str, int]:
    """How many of the first ``k`` ranked tokens each language gets (a shared token counts for the language it
    gains most in, or whose turn took it). Languages with none get 0."""
    if k < 0:
        raise UserError(f"token budget {k} is negative; give a budget of 0 or more new tokens")
    counts = {language: 0 for language in languages}
    for candidate in ranked[:k]:
        counts[candidate.language] = counts.get(candidate.language, 0) + 1
    return counts


def language_candidates(
    language: str, source_tokenizer: Any, auxiliary_tokenizer: Any, documents: Sequence[str], *,
    batch_size: int = 512,
) -> LanguageCandidates:
    """Count one language's candidates: the auxiliary tokenizer's tokens absent from the source, most frequent first
    on ``documents`` (ties: lower id first, as ``expand.top_k_new_tokens``), each with the source tokens its text
    takes now; and the documents' word count (``segmentation_for(language)``; characters where the script does not
    delimit words)."""
    from vocadapt.components.tokenizers.canonical import canonical_index, canonical_tokens
    from vocadapt.components.tokenizers.fertility import count_tokens
    from vocadapt.components.tokenizers.segmentation import segmentation_for

    documents = list(documents)
    ids = count_tokens(auxiliary_tokenizer, documents, batch_size=batch_size)
    forms = canonical_tokens(auxiliary_tokenizer)
    counts = np.bincount(np.concatenate(ids), minlength=len(forms)) if ids else np.zeros(len(forms), dtype=int)
    source = canonical_index(source_tokenizer)
    order = sorted((token_id for token_id in np.flatnonzero(counts).tolist() if forms[token_id] is not None),
                   key=lambda token_id: (-int(counts[token_id]), token_id))  # fmt: skip
    chosen = [token_id for token_id in order if not forms[token_id].special and forms[token_id] not in source]
    texts = [forms[token_id].text_bytes.decode("utf-8", errors="replace") for token_id in chosen]
    pieces = source_tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []
    candidates = tuple(Candidate(forms[token_id], int(counts[token_id]), max(len(piece_ids), 1))
                       for token_id, piece_ids in zip(chosen, pieces))  # fmt: skip
    words = segmentation_for(language, documents).count_words(documents)
    if words is None:
        words = sum(len(document) for document in documents)
    return LanguageCandidates(language, candidates, int(words))


def split_budget(languages: Sequence[LanguageCandidates], k: int, rule: BudgetRule = "gain") -> dict[str, int]:
    """How many of ``k`` new tokens each language gets under ``rule``, before the expansion's own skips (which
    take the next candidate in the same order)."""
    return allocation(rank_candidates(languages, rule), k, [entry.language for entry in languages])
