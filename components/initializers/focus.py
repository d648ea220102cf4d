"""FOCUS: a sparsemax-weighted combination of shared tokens' source rows, the similarities coming from fastText
embeddings of the target tokens ("0.01GB" §4.2; SALT §4.2; Dobler and de Melo 2023).

The default is the authors' package, deepfocus 1.0.1 (``focus_additional_token_initialization``): sparsemax of the
plain cosine similarities, checked against rows made by that package in tests/initializers/test_authors_reference.py.
``temperature`` < 1 sharpens the weights (0.1 is the variant vocadapt shipped before; BENCHMARKS.md, "Initialiser
defaults vs the authors' code", compares the two).
"""

from __future__ import annotations

import torch

from vocadapt.components.initializers import InitProblem, register_initializer
from vocadapt.components.initializers._common import (
    chunked_similarity_mix,
    gaussian_rows,
    helper_anchors,
    top_sparsemax,
)

HELPERS = ("fasttext", "vectors", "model")


def focus_sparse_weights(similarity: torch.Tensor, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, O) cosine similarities -> the non-zeros of sparsemax(similarity / temperature): (weights, indices)."""
    return top_sparsemax(similarity / temperature)


def focus_weights(similarity: torch.Tensor, temperature: float) -> torch.Tensor:
    """(n, O) cosine similarities -> (n, O) sparsemax weights: non-negative, mostly zero, rows summing to one."""
    weights, indices = focus_sparse_weights(similarity, temperature)
    return torch.zeros_like(similarity).scatter_(1, indices, weights)


@register_initializer("focus", needs_helper=True, helpers=HELPERS)
def focus(problem: InitProblem, *, temperature: float = 1.0) -> torch.Tensor:
    """(N, hidden): row i = sum_j sparsemax(cos(f_i, f_j) / temperature)_j * source row of shared token j.

    temperature: divides the similarities before sparsemax; 1 (default) is deepfocus' sparsemax of the plain cosine
        similarities, lower keeps fewer neighbours (0.1 was vocadapt's earlier default).
    A new token without a fastText vector gets a random row from N(mu, sigma^2), as in FOCUS.
    """
    if temperature <= 0:
        raise ValueError(f"focus temperature must be positive, got {temperature}")
    anchors, anchor_rows, queries, has_vector = helper_anchors(problem, "focus")
    rows = chunked_similarity_mix(
        queries, anchors, anchor_rows, lambda similarity: focus_sparse_weights(similarity, temperature),
        sparse=True,
    )
    if not bool(has_vector.all()):
        rows[~has_vector] = gaussian_rows(problem.source_matrix, int((~has_vector).sum()), problem.generator)
    return rows
