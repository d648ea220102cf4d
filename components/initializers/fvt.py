"""FVT (Fast Vocabulary Transfer), also "mean": the mean of the source rows of the token's text tokenized by the
source tokenizer (SAVA §3.1; "Design choices" eq. 1; "0.01GB" §4.3 "Mean")."""

from __future__ import annotations

import dataclasses

import torch

from vocadapt.components.initializers import InitProblem, register_initializer
from vocadapt.components.initializers._common import (
    columnwise_gaussian_rows, gathered_rows, ids_key,
)
from vocadapt.components.last_result_cache import LastResultCache

_PIECES = LastResultCache()


def piece_bags(problem: InitProblem) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The FVT decomposition as embedding bags: (flat source ids, (N,) offsets, (N,) bool non-empty).

    The decomposition tokenizes each token's text (with its word-start space), never its stored string
    (the string ``▁hello`` tokenizes to ``['▁', '▁hello']``); it comes from the tokenizer toolkit's
    ``source_pieces``.
    """
    from vocadapt.components.tokenizers import source_pieces

    def compute() -> list[list[int]]:
        return source_pieces(problem.target_tokenizer, problem.new_target_ids.tolist(), problem.source_tokenizer)

    key = ids_key(problem.new_target_ids)
    pieces = _PIECES.get((problem.target_tokenizer, problem.source_tokenizer), key, compute)
    rows = problem.source_matrix.shape[0]
    pieces = [[piece for piece in token_pieces if 0 <= piece < rows] for token_pieces in pieces]
    lengths = torch.tensor([len(token_pieces) for token_pieces in pieces], dtype=torch.long)
    flat = torch.tensor([piece for token_pieces in pieces for piece in token_pieces], dtype=torch.long)
    offsets = torch.cumsum(lengths, 0) - lengths
    return flat, offsets, lengths > 0


@register_initializer("fvt", aliases=("mean",), columnwise=True)
def fvt(problem: InitProblem) -> torch.Tensor:
    """(N, hidden): row i = mean of ``source_matrix[p]`` over the source pieces p of new token i.

    One ``embedding_bag`` call does every token at once. A token whose text yields no source piece (possible only
    for an empty or untokenizable token) gets a random row from N(mu, sigma^2) instead, drawn column by column
    (``columnwise_gaussian_rows``) so that streamed surgery gives it the same values.
    """
    flat, offsets, has_pieces = piece_bags(problem)
    if len(flat):
        pieces, index = gathered_rows(problem, flat)  # only the rows of the pieces, in float32
        rows = torch.nn.functional.embedding_bag(index, pieces, offsets, mode="mean")
    else:
        rows = torch.zeros(len(offsets), problem.source_matrix.shape[1], dtype=torch.float32)
    if not bool(has_pieces.all()):
        missing = int((~has_pieces).sum())
        rows[~has_pieces] = columnwise_gaussian_rows(problem, missing)
    return rows


UNSEEN_RULES = ("random", "fvt")  # the row of a new token a vector method has no vector for


def unseen_rows(problem: InitProblem, missing: torch.Tensor, unseen: str) -> torch.Tensor:
    """Rows for the new tokens flagged in ``missing`` (N,) bool: "random" draws N(mu, sigma^2) column by column
    (:func:`columnwise_gaussian_rows`), "fvt" takes their FVT rows (the mean of their source pieces), which
    depend on no random draw. Both are columnwise."""
    if unseen == "fvt":
        return fvt(dataclasses.replace(problem, new_target_ids=problem.new_target_ids[missing]))
    return columnwise_gaussian_rows(problem, int(missing.sum()))
