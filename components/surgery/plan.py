"""Which rows of the adapted matrices are copied, which are initialised, and how many rows there are.

Replacement: target tokens whose canonical form (or special role) exists in the source copy that source row; the
rest are initialised. Expansion: the target tokenizer keeps every source id, so every source row is kept at its id
and the appended tokens are initialised. Rows past the last token id (padding: checkpoints pad the matrix to a
multiple of 8, 64 or 128, so it has more rows than the tokenizer has ids) are kept from the source in expansion
and are zero otherwise; in expansion the appended ids take the first padding rows (Qwen3: 151,669 ids in 151,936
rows, so new ids 151,669.. are initialised there) and the rows grow only past the last padding row. A source
tokenizer with ids past the source rows is refused (:func:`check_tokenizer_fits`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from vocadapt.components.errors import UserError
from vocadapt.components.last_result_cache import LastResultCache


@dataclass(frozen=True)
class RowLayout:
    """How the adapted matrices' rows are laid out.

    mode: "replace" or "expand".
    target_vocab_rows: rows of the adapted matrices (e.g. padded to a multiple of 64). None: the target's token
        count for replacement, max(source rows, target token count) for expansion.
    target_to_source / new_target_ids: the rows to copy (target id -> source id) and the ids to initialise, when
        the caller knows them (a trim, a vocabulary change already computed); None: computed from the tokenizers.
    """

    mode: str = "replace"
    target_vocab_rows: int | None = None
    target_to_source: dict[int, int] | None = None
    new_target_ids: Any = None


@dataclass
class VocabularyPlan:
    """mode: "replace" or "expand".
    target_to_source: target id -> source id whose row is copied exactly.
    new_target_ids: (N,) target ids the method initialises, ascending.
    rows: rows of the adapted matrices (>= number of target token ids).
    source_rows: rows of the source matrices.
    """

    mode: str
    target_to_source: dict[int, int]
    new_target_ids: torch.Tensor
    rows: int
    source_rows: int

    def record(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "copied": len(self.target_to_source),
            "initialised": int(len(self.new_target_ids)),
            "rows": self.rows,
            "source_rows": self.source_rows,
            "new_id_ranges": id_ranges(self.new_target_ids.tolist()),
        }


def id_ranges(ids: list[int]) -> list[list[int]]:
    """Ascending ids as half-open [start, end) runs: a compact record of which rows were initialised."""
    runs: list[list[int]] = []
    for token_id in ids:
        if runs and runs[-1][1] == token_id:
            runs[-1][1] += 1
        else:
            runs.append([token_id, token_id + 1])
    return runs


# The source tokenizer's highest id, read once for every method's surgery (Gemma-3's 262K-token vocabulary takes 0.2 s
# to read out); keyed by the tokenizer object and its length, so a token added since reads it again.
_HIGHEST_ID = LastResultCache()


def highest_token_id(tokenizer: Any) -> int:
    """The highest id ``tokenizer`` can produce: its vocabulary's and its added tokens' (ids may have gaps, so this
    can exceed ``len(tokenizer) - 1``); -1 for an empty tokenizer."""
    return _HIGHEST_ID.get((tokenizer,), len(tokenizer), lambda: max(tokenizer.get_vocab().values(), default=-1))


def check_tokenizer_fits(tokenizer: Any, rows: int, *, what: str = "the source tokenizer",
                         rows_from: str = "its input-embedding matrix") -> None:
    """Refuse a tokenizer with ids past the model's last embedding row: such an id has no row to copy
    or keep, and on a GPU it crashes the model. A tokenizer smaller than the rows (padding) is fine. ``rows_from``
    says where ``rows`` was read (the matrix, or config.json's vocab_size)."""
    highest = highest_token_id(tokenizer)
    if highest >= rows:
        raise UserError(
            f"{what} has {len(tokenizer):,} tokens with ids up to {highest:,}, but the model has only {rows:,} "
            f"embedding rows ({rows_from}): ids {rows:,}..{highest:,} have no row. Give the tokenizer saved with "
            f"this model, or first resize the model's embeddings to at least {highest + 1:,} rows "
            f"(model.resize_token_embeddings({highest + 1}), then save_pretrained)"
        )


def _token_ids(tokenizer: Any) -> list[int]:
    from vocadapt.components.tokenizers import canonical_tokens

    return [token_id for token_id, form in enumerate(canonical_tokens(tokenizer)) if form is not None]


def _expansion_map(source_tokenizer: Any, target_tokenizer: Any, source_rows: int) -> dict[int, int]:
    from vocadapt.components.tokenizers import canonical_tokens

    source_forms, target_forms = canonical_tokens(source_tokenizer), canonical_tokens(target_tokenizer)
    moved = [
        token_id for token_id, form in enumerate(source_forms)
        if form is not None and (token_id >= len(target_forms) or target_forms[token_id] != form)
    ]
    if moved:
        raise ValueError(
            f"mode 'expand' needs a target tokenizer that keeps every source token at its id, but {len(moved)} "
            f"source ids differ (first: {moved[:5]}); build it with the tokenizer toolkit's expansion, or use "
            "mode 'replace'"
        )
    return {token_id: token_id for token_id, form in enumerate(source_forms) if form is not None and token_id < source_rows}


def plan_vocabulary(
    source_tokenizer: Any,
    target_tokenizer: Any,
    *,
    source_rows: int,
    layout: RowLayout = RowLayout(),
) -> VocabularyPlan:
    """Plan the rows as ``layout`` says; its ``target_to_source`` / ``new_target_ids`` win over the computed ones."""
    mode, target_vocab_rows = layout.mode, layout.target_vocab_rows
    target_to_source, new_target_ids = layout.target_to_source, layout.new_target_ids
    if mode not in ("replace", "expand"):
        raise ValueError(f"mode must be 'replace' or 'expand', got {mode!r}")
    check_tokenizer_fits(source_tokenizer, source_rows)
    if target_to_source is None:
        if mode == "expand":
            target_to_source = _expansion_map(source_tokenizer, target_tokenizer, source_rows)
        else:
            from vocadapt.components.tokenizers import token_overlap

            target_to_source = token_overlap(source_tokenizer, target_tokenizer).target_to_source
    target_ids = _token_ids(target_tokenizer)
    if new_target_ids is None:
        new_target_ids = [token_id for token_id in target_ids if token_id not in target_to_source]
    new_ids = torch.as_tensor(list(new_target_ids) if not torch.is_tensor(new_target_ids) else new_target_ids,
                              dtype=torch.long).sort().values
    highest = max([*target_ids, *target_to_source, -1]) + 1
    default_rows = max(source_rows, highest) if mode == "expand" else highest
    rows = default_rows if target_vocab_rows is None else int(target_vocab_rows)
    if rows < highest:
        raise UserError(f"target_vocab_rows (--rows) {rows:,} is smaller than the target tokenizer's highest id + 1 "
                        f"({highest:,}): ids {rows:,}..{highest - 1:,} would have no row; give at least {highest:,} "
                        "rows, or leave it unset to size the matrices by the tokenizer")
    bad_sources = [s for s in target_to_source.values() if not 0 <= s < source_rows]
    if bad_sources:
        raise ValueError(f"target_to_source points at source rows that do not exist: {bad_sources[:5]} (rows: {source_rows})")
    shared_and_new = set(new_ids.tolist()) & set(target_to_source)
    if shared_and_new:
        raise ValueError(f"ids {sorted(shared_and_new)[:5]} are both shared and new; a token is one or the other")
    if len(new_ids) and (int(new_ids.min()) < 0 or int(new_ids.max()) >= rows):
        raise ValueError(f"new_target_ids must lie in 0..{rows - 1}")
    return VocabularyPlan(mode, dict(sorted(target_to_source.items())), new_ids, rows, source_rows)
