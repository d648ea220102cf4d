"""Which target tokens the source model already knows, matched on canonical form.

SALT (Appendix A, Table 6) reports, for a target vocabulary against a source model: tokens copied from the source
embeddings, tokens left to initialise, and the coverage (share of the target vocabulary found in the source).
Matching raw strings undercounts badly (``ĠCafÃ©`` never equals ``▁Café``); matching canonical forms does not.
Special tokens are matched by role as well: the target's bos/eos/pad/unk take the source's bos/eos/pad/unk rows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from vocadapt.components.collector import collector_paused
from vocadapt.components.tokenizers._backend import backend_of
from vocadapt.components.tokenizers.canonical import canonical_index, canonical_tokens, special_role_ids


@dataclass(frozen=True)
class TokenOverlap:
    """The shared part of two vocabularies, seen from the target.

    Attributes:
        target_to_source: target token id -> source token id, for every target token whose canonical form (or
            special role) exists in the source.
        source_vocab_size: number of tokens (ids that are tokens) in the source tokenizer.
        target_vocab_size: number of tokens in the target tokenizer.
        copied: target tokens whose source row is copied (``len(target_to_source)``).
        to_initialise: target tokens that need a new row.
        coverage_percent: ``100 * copied / target_vocab_size`` (SALT's coverage).
        shared_by_raw_string: tokens whose stored strings are identical, for comparison with naive matching.
        special_roles: role -> (target id, source id) for bos/eos/pad/unk present in both.
    """

    target_to_source: dict[int, int]
    source_vocab_size: int
    target_vocab_size: int
    copied: int
    to_initialise: int
    coverage_percent: float
    shared_by_raw_string: int
    special_roles: dict[str, tuple[int, int]] = field(default_factory=dict)

    def coverage_row(self) -> dict[str, Any]:
        """One row of SALT's Table 6: copied, initialised, coverage (%)."""
        return {
            "copied": self.copied,
            "to_initialise": self.to_initialise,
            "coverage_percent": round(self.coverage_percent, 2),
        }

    def as_dict(self, *, with_map: bool = False) -> dict[str, Any]:
        """A JSON-ready summary; the (large) id map only when asked for."""
        summary = asdict(self)
        summary["special_roles"] = {role: list(ids) for role, ids in self.special_roles.items()}
        if with_map:
            summary["target_to_source"] = {str(t): s for t, s in sorted(self.target_to_source.items())}
        else:
            del summary["target_to_source"]
        return summary


def token_overlap(source_tokenizer: Any, target_tokenizer: Any) -> TokenOverlap:
    """Match every target token onto the source vocabulary by canonical form, then special tokens by role.

    Args:
        source_tokenizer: the tokenizer of the model whose embeddings are reused.
        target_tokenizer: the new tokenizer.

    Returns:
        a :class:`TokenOverlap`; ``target_to_source`` is deterministic (regular pieces win over byte pieces,
        then the lowest source id).
    """
    with collector_paused():  # a pair per shared token, 262K for Gemma-3's (components/collector.py)
        return _token_overlap(source_tokenizer, target_tokenizer)


def _token_overlap(source_tokenizer: Any, target_tokenizer: Any) -> TokenOverlap:
    source_index = canonical_index(source_tokenizer)
    target_forms = canonical_tokens(target_tokenizer)
    target_to_source = {
        target_id: source_index[form]
        for target_id, form in enumerate(target_forms)
        if form is not None and form in source_index
    }
    source_roles = special_role_ids(source_tokenizer)
    target_roles = special_role_ids(target_tokenizer)
    special_roles = {
        role: (target_roles[role], source_roles[role]) for role in target_roles if role in source_roles
    }
    for target_id, source_id in special_roles.values():
        target_to_source[target_id] = source_id
    target_count = sum(form is not None for form in target_forms)
    source_count = sum(form is not None for form in canonical_tokens(source_tokenizer))
    raw_source = set(backend_of(source_tokenizer).get_vocab(with_added_tokens=True))
    raw_target = set(backend_of(target_tokenizer).get_vocab(with_added_tokens=True))
    copied = len(target_to_source)
    return TokenOverlap(
        target_to_source=dict(sorted(target_to_source.items())),
        source_vocab_size=source_count,
        target_vocab_size=target_count,
        copied=copied,
        to_initialise=target_count - copied,
        coverage_percent=100.0 * copied / max(target_count, 1),
        shared_by_raw_string=len(raw_source & raw_target),
        special_roles=special_roles,
    )


def new_token_ids(source_tokenizer, tokenizer) -> set[int]:
    """Ids of ``tokenizer`` whose canonical form the source tokenizer lacks: the new vocabulary (%Gen)."""
    overlap = token_overlap(source_tokenizer, tokenizer)
    return set(range(len(tokenizer))) - set(overlap.target_to_source)
