"""Expansion of one source tokenizer for several target languages with one token budget.

Each language has its own auxiliary tokenizer (trained on that language) and ranking text; their candidates are
put in one order by ``budget.rank_candidates`` (the rule: ``gain`` or ``even``) and the source is expanded along it
with ``expand.expand_vocabulary`` until ``k`` ids are added, protecting the source language as a one-language
expansion does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vocadapt.components.tokenizers.budget import BudgetRule, LanguageCandidates, RankedCandidate, language_candidates
from vocadapt.components.tokenizers.expand import VocabularyExpansion, expand_vocabulary


@dataclass
class MultilingualExpansion(VocabularyExpansion):
    """A :class:`VocabularyExpansion` that also says how the budget went: ``planned`` (the first k of the order
    per language, before skips), ``added`` (requested ids added per language: the language a token gains most in,
    or whose turn took it), and the rule."""

    rule: str = "gain"
    planned: dict[str, int] = field(default_factory=dict)
    added: dict[str, int] = field(default_factory=dict)


def count_candidates(source_tokenizer: Any, auxiliary_tokenizers: Mapping[str, Any],
                     documents: Mapping[str, Sequence[str]]) -> list[LanguageCandidates]:
    """Every language's candidates: its auxiliary tokenizer's tokens the source lacks, counted on its
    ``documents`` (:func:`budget.language_candidates`), in the order of ``auxiliary_tokenizers``."""
    return [language_candidates(language, source_tokenizer, auxiliary_tokenizers[language], documents[language])
            for language in auxiliary_tokenizers]


def expand_for_languages(
    source_tokenizer: Any,
    candidates: Sequence[LanguageCandidates],
    k: int | None,
    *,
    rule: BudgetRule = "gain",
    **options,
) -> MultilingualExpansion:
    """Expand ``source_tokenizer`` with up to ``k`` new tokens (None: every candidate) drawn from every language's
    candidates (:func:`count_candidates`; one counting may serve several rules), in the order ``rule`` gives.
    ``options`` go to :func:`expand.expand_vocabulary` (``protect``, ``protect_words``...)."""
    from vocadapt.components.tokenizers.budget import allocation, rank_candidates

    costs = None
    if rule == "gain":  # the ids each candidate takes, measured along the saving order with no budget
        trial = expand_vocabulary(source_tokenizer, [entry.token for entry in rank_candidates(candidates, "saving")],
                                  **options)
        costs = id_costs(trial)
    ranked = rank_candidates(candidates, rule, costs)
    languages = [entry.language for entry in candidates]
    expansion = expand_vocabulary(source_tokenizer, [entry.token for entry in ranked], max_new_tokens=k, **options)
    return MultilingualExpansion(
        tokenizer=expansion.tokenizer, new_token_ids=expansion.new_token_ids,
        intermediate_token_ids=expansion.intermediate_token_ids, skipped=expansion.skipped,
        source_vocab_size=expansion.source_vocab_size, rule=rule,
        planned=allocation(ranked, len(ranked) if k is None else k, languages),
        added=_added_per_language(expansion, ranked, languages),
    )


def id_costs(expansion: VocabularyExpansion) -> dict[Any, int]:
    """Each requested token of an expansion and the ids it took: itself and the intermediates appended for it
    (ids are appended in order, each token's intermediates just before it)."""
    from vocadapt.components.tokenizers.canonical import canonical_tokens

    forms = canonical_tokens(expansion.tokenizer)
    intermediates = set(expansion.intermediate_token_ids)
    costs: dict[Any, int] = {}
    pending = 0
    for token_id in expansion.new_token_ids:
        if token_id in intermediates:
            pending += 1
            continue
        costs[forms[token_id]] = pending + 1
        pending = 0
    return costs


def _added_per_language(expansion: VocabularyExpansion, ranked: Sequence[RankedCandidate],
                        languages: Sequence[str]) -> dict[str, int]:
    from vocadapt.components.tokenizers.canonical import canonical_tokens

    owner = {entry.token: entry.language for entry in ranked}
    forms = canonical_tokens(expansion.tokenizer)
    intermediates = set(expansion.intermediate_token_ids)
    counts = {language: 0 for language in languages}
    for token_id in expansion.new_token_ids:
        language = owner.get(forms[token_id]) if token_id not in intermediates else None
        if language is not None:
            counts[language] += 1
    return counts
