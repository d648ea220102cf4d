"""CLP: a similarity-weighted sum of shared tokens' source rows, similarities measured in a helper's embedding space
(SAVA §3.1, after Ostendorff and Rehm 2023)."""

from __future__ import annotations

import torch

from vocadapt.components.initializers import InitProblem, register_initializer
from vocadapt.components.initializers._common import (
    chunked_similarity_mix,
    gaussian_rows,
    helper_anchors,
)

HELPERS = ("model", "fasttext", "vectors")


def clp_weights(similarity: torch.Tensor, top_k: int = 0) -> torch.Tensor:
    """Normalised cosine similarity: (n, O) similarities -> (n, O) weights >= 0 whose rows sum to one.

    Negative similarities are clipped to zero (a sum over ~20,000 signed cosines can be near zero and blow the
    weights up); top_k > 0 keeps only each row's k largest. A row with no positive similarity weighs all equally.
    """
    weights = similarity.clamp_min(0)
    if 0 < top_k < weights.shape[1]:
        kept = torch.topk(weights, top_k, dim=1)
        weights = torch.zeros_like(weights).scatter_(1, kept.indices, kept.values)
    totals = weights.sum(1, keepdim=True)
    uniform = torch.full_like(weights, 1.0 / weights.shape[1])
    return torch.where(totals > 0, weights / totals.clamp_min(1e-12), uniform)


@register_initializer("clp", needs_helper=True, helpers=HELPERS)
def clp(problem: InitProblem, *, top_k: int = 0) -> torch.Tensor:
    """(N, hidden): row i = sum_j alpha(h_i, h_j) * source row of shared token j, alpha summing to one over j.

    top_k: keep only the k most similar shared tokens per new token (0: all of them, as in the paper).
    A new token without a helper vector gets a random row from N(mu, sigma^2).
    """
    anchors, anchor_rows, queries, has_vector = helper_anchors(problem, "clp")
    rows = chunked_similarity_mix(
        queries, anchors, anchor_rows, lambda similarity: clp_weights(similarity, top_k)
    )
    if not bool(has_vector.all()):
        rows[~has_vector] = gaussian_rows(problem.source_matrix, int((~has_vector).sum()), problem.generator)
    return rows
