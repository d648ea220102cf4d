"""CLP: a similarity-weighted sum of shared tokens' source rows, similarities measured in a helper's embedding space
(SAVA §3.1, after Ostendorff and Rehm 2023).

Registered ``columnwise``: the weights come from the helper's vectors alone, so column j of a new row is a weighted
sum of column j of the shared tokens' source rows, and checkpoint surgery streams the matrix a column block at a
time. Two things differ from focus and salt, whose few weights per token are computed once and cached:

- the weights are dense, (N x O) float32 (1 GB for 16,000 new and 16,000 shared tokens), so they are not kept
  across column blocks: each block recomputes them, a chunk of SIMILARITY_CHUNK_ROWS queries at a time, from the
  same helper vectors with the same arithmetic (the same bytes). That adds a (chunk x helper dim) @ (helper dim x O)
  product per chunk and block, helper dim / block width of the mix itself (300 / 1,024 with a fastText helper);
- the mix is a matrix product, whose rounding a BLAS may make depend on the output's width. It is computed on
  column tiles of min(TILE, hidden) columns aligned to multiples of that width in the full matrix, zero-padded, so
  every product has the same shape and column j the same place in it whatever block it comes from: the streamed
  rows equal the whole-matrix ones byte for byte. Against the single product used before, rows may move by float32
  rounding (on the tiny test vocabularies they are the same bytes). torch's MKL products on this machine gave the
  same columns at widths 48, 64 and 1,024 anyway; the tiles make it hold by construction. 512-column tiles cost
  nothing against one product (0.55-0.60 s for 2,048 x 17,000 @ 17,000 x 1,024 either way); 64-column ones 1.7x.
  The tiles are built one at a time from the source matrix, so the shared tokens' rows are never held whole.

A token without a helper vector gets its N(mu, sigma^2) row column by column (``columnwise_gaussian_rows``).
"""

from __future__ import annotations

import torch

from vocadapt.components.initializers import InitProblem, register_initializer
from vocadapt.components.initializers._common import (
    SIMILARITY_CHUNK_ROWS,
    columnwise_gaussian_rows,
    helper_anchors,
    unit_rows,
)

HELPERS = ("model", "fasttext", "vectors")
TILE = 512  # columns per product (at most); the default streamed block, 1,024 columns, is two tiles


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


def tile_bounds(first: int, block_width: int, width: int) -> list[tuple[slice, slice]]:
    """Columns first .. first + block_width - 1 of a wider matrix as tiles of ``width`` columns aligned to multiples
    of ``width`` in that matrix: [(the tile's columns holding the block's, those columns of the block)]."""
    bounds, column, stop = [], first, first + block_width
    while column < stop:
        tile_start = column // width * width
        end = min(tile_start + width, stop)
        bounds.append((slice(column - tile_start, end - tile_start), slice(column - first, end - first)))
        column = end
    return bounds


# Dense weights kept for every tile when they fit (N x O float32: 300 new x 128,256 shared tokens is 154 MB); past
# this, each tile recomputes them, a chunk of queries at a time, with the same arithmetic (the same bytes).
KEPT_WEIGHTS_BYTES = 512 * 1024 * 1024


@register_initializer("clp", needs_helper=True, helpers=HELPERS, columnwise=True)
def clp(problem: InitProblem, *, top_k: int = 0) -> torch.Tensor:
    """(N, hidden): row i = sum_j alpha(h_i, h_j) * source row of shared token j, alpha summing to one over j.

    top_k: keep only the k most similar shared tokens per new token (0: all of them, as in the paper).
    A new token without a helper vector gets a random row from N(mu, sigma^2), drawn column by column.
    The shared tokens' source rows are read one (O, TILE) float32 tile at a time (in an expansion every source token
    is shared: all of them as float32 were the size of the whole matrix, 2.1 GB at Llama-3.1-8B's shape, and the
    tiles as much again).
    """
    anchors, anchor_sources, queries, has_vector = helper_anchors(problem, "clp")
    block_width = problem.source_matrix.shape[1]
    first, hidden = problem.columns or (0, block_width)
    width = min(TILE, hidden)
    unit_keys = unit_rows(anchors)
    starts = range(0, queries.shape[0], SIMILARITY_CHUNK_ROWS)

    def weights_of(start: int) -> torch.Tensor:
        return clp_weights(unit_rows(queries[start : start + SIMILARITY_CHUNK_ROWS]) @ unit_keys.T, top_k)

    kept = None
    if queries.shape[0] * anchors.shape[0] * 4 <= KEPT_WEIGHTS_BYTES:
        kept = [weights_of(start) for start in starts]
    rows = torch.empty(queries.shape[0], block_width, dtype=torch.float32)
    for tile_columns, block_columns in tile_bounds(first, block_width, width):
        tile = torch.zeros(len(anchor_sources), width, dtype=torch.float32)  # zero past the block's columns
        tile[:, tile_columns] = problem.source_matrix[anchor_sources, block_columns].float()
        for index, start in enumerate(starts):
            weights = kept[index] if kept is not None else weights_of(start)
            rows[start : start + SIMILARITY_CHUNK_ROWS, block_columns] = (weights @ tile)[:, tile_columns]
        del tile
    if not bool(has_vector.all()):
        rows[~has_vector] = columnwise_gaussian_rows(problem, int((~has_vector).sum()))
    return rows
