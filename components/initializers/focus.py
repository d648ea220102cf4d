"""FOCUS: a sparsemax-weighted combination of shared tokens' source rows, the similarities coming from fastText
embeddings of the target tokens ("0.01GB" §4.2; SALT §4.2; Dobler and de Melo 2023).

The default is the authors' package, deepfocus 1.0.1 (``focus_additional_token_initialization``): sparsemax of the
plain cosine similarities, checked against rows made by that package in tests/initializers/test_authors_reference.py.
``temperature`` < 1 sharpens the weights (0.1 is the variant vocadapt shipped before; BENCHMARKS.md, "Initialiser
defaults vs the authors' code", compares the two).

Registered ``columnwise``: the sparsemax weights come from the helper's vectors alone (no source row is read to
compute them), so column j of a new row is a weighted sum of column j of shared tokens' source rows, and checkpoint
surgery streams the matrix a column block at a time. The weights are computed once, for the first block, and reused
by the other blocks and by an untied model's LM head; the sum is one ``embedding_bag`` whose order over neighbours
does not depend on the width, and a token without a vector gets its N(mu, sigma^2) row column by column
(``columnwise_gaussian_rows``), so the streamed rows equal the whole-matrix ones byte for byte.
"""

from __future__ import annotations

import torch

from vocadapt.components.initializers import InitProblem, register_initializer
from vocadapt.components.initializers._common import (
    SIMILARITY_CHUNK_ROWS,
    columnwise_gaussian_rows,
    helper_anchors,
    ids_key,
    mix_rows,
    overlap_pairs,
    top_sparsemax,
    unit_rows,
)
from vocadapt.components.last_result_cache import LastResultCache

HELPERS = ("fasttext", "vectors", "model")
_WEIGHTS = LastResultCache()


def focus_sparse_weights(similarity: torch.Tensor, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, O) cosine similarities -> the non-zeros of sparsemax(similarity / temperature): (weights, indices)."""
    return top_sparsemax(similarity / temperature)


def focus_weights(similarity: torch.Tensor, temperature: float) -> torch.Tensor:
    """(n, O) cosine similarities -> (n, O) sparsemax weights: non-negative, mostly zero, rows summing to one."""
    weights, indices = focus_sparse_weights(similarity, temperature)
    return torch.zeros_like(similarity).scatter_(1, indices, weights)


def focus_neighbours(queries: torch.Tensor, anchors: torch.Tensor, temperature: float
                     ) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The role- and column-independent part: for each chunk of SIMILARITY_CHUNK_ROWS queries, the non-zero
    sparsemax weights over the anchors and their anchor indices, ((n, k) float32, (n, k) int64)."""
    unit_keys = unit_rows(anchors)
    return [focus_sparse_weights(unit_rows(queries[start : start + SIMILARITY_CHUNK_ROWS]) @ unit_keys.T, temperature)
            for start in range(0, queries.shape[0], SIMILARITY_CHUNK_ROWS)]


@register_initializer("focus", needs_helper=True, helpers=HELPERS, columnwise=True)
def focus(problem: InitProblem, *, temperature: float = 1.0) -> torch.Tensor:
    """(N, hidden): row i = sum_j sparsemax(cos(f_i, f_j) / temperature)_j * source row of shared token j.

    temperature: divides the similarities before sparsemax; 1 (default) is deepfocus' sparsemax of the plain cosine
        similarities, lower keeps fewer neighbours (0.1 was vocadapt's earlier default).
    A new token without a fastText vector gets a random row from N(mu, sigma^2), as in FOCUS, drawn column by
    column (``columnwise_gaussian_rows``).
    """
    if temperature <= 0:
        raise ValueError(f"focus temperature must be positive, got {temperature}")
    anchors, anchor_sources, queries, has_vector = helper_anchors(problem, "focus")
    overlap_targets, overlap_sources = overlap_pairs(problem)
    key = (ids_key(problem.new_target_ids), ids_key(overlap_targets), ids_key(overlap_sources), temperature)
    chunks = _WEIGHTS.get((problem.helper, problem.target_tokenizer), key,
                          lambda: focus_neighbours(queries, anchors, temperature))
    rows = torch.empty(queries.shape[0], problem.source_matrix.shape[1], dtype=torch.float32)
    for index, (weights, indices) in enumerate(chunks):
        start = index * SIMILARITY_CHUNK_ROWS
        rows[start : start + SIMILARITY_CHUNK_ROWS] = mix_rows(problem, anchor_sources, indices, weights)
    if not bool(has_vector.all()):
        rows[~has_vector] = columnwise_gaussian_rows(problem, int((~has_vector).sum()))
    return rows
