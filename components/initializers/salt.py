"""SALT: per new token, sparsemax over helper similarities picks the nearest shared tokens, and a least-squares map
from helper to source space fitted on just those projects the token (SALT §3, steps 1-4).

Registered ``columnwise``: the map is applied as (q pinv(E'_t)) E'_s, whose coefficients q pinv(E'_t) come from the
helper's vectors alone (neighbours, Gram matrices, intercept), so column j of a new row is a combination of column j
of its neighbours' source rows: no source row is read across columns, and no fit runs in source space. Checkpoint
surgery streams the matrix a column block at a time; the coefficients are computed once, for the first block, and
reused by the other blocks and by an untied model's LM head. The sum is one ``embedding_bag`` (its order over
neighbours does not depend on the width) and a fallback row is drawn column by column (``columnwise_gaussian_rows``),
so the streamed rows equal the whole-matrix ones byte for byte.
"""

from __future__ import annotations

import torch

from vocadapt.components.initializers import InitProblem, register_initializer
from vocadapt.components.initializers._common import (
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
# New tokens per batched solve: 512 tokens x 64 neighbours x 300 dims of neighbour vectors is ~80 MB in float64.
CHUNK = 512
_COEFFICIENTS = LastResultCache()


def min_norm_coefficients(gram: torch.Tensor, projections: torch.Tensor, ridge: float = 1e-9) -> torch.Tensor:
    """(n, k, 1) coefficients c = pinv(G) b for symmetric PSD (n, k, k) Gram matrices G, as a batched Cholesky
    solve of (G + lambda I) c = b with lambda = ridge x mean(diag G); as lambda -> 0 this is the minimum-norm
    least-squares solution, and padding slots (zero rows of G and b) get exactly zero.

    Why not eigh: on a loaded 2-core machine torch's batched ``linalg.eigh`` of 512 64x64 float64 matrices took
    46 s with 2 threads (0.4 s with one); the Cholesky solve takes 0.1 s.
    """
    size = gram.shape[-1]
    scale = gram.diagonal(dim1=-2, dim2=-1).mean(-1).clamp_min(1e-30)[:, None, None]
    regularised = gram + ridge * scale * torch.eye(size, dtype=gram.dtype)
    factor, _ = torch.linalg.cholesky_ex(regularised)
    return torch.cholesky_solve(projections, factor)


def neighbourhood_coefficients(
    queries: torch.Tensor, anchors: torch.Tensor, temperature: float, max_neighbours: int, ridge: float = 1e-9,
    intercept: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Steps 2-4 for one chunk, batched, as coefficients over the neighbours' source rows.

    queries (n, m) helper vectors of new tokens; anchors (O, m) helper vectors of shared tokens. For each query: the
    support of sparsemax(cos / temperature) (at most ``max_neighbours``, the largest weights) gives E'_t (k, m) and
    E'_s (k, h); X = pinv(E'_t) E'_s and the row is q X, computed as (q pinv(E'_t)) E'_s with
    q pinv(E'_t) = (E'_t q)^T pinv(E'_t E'_t^T) (a batched Cholesky solve). Returned are those coefficients, so no
    (n, k, h) tensor is built and no source row is read: one weighted ``embedding_bag`` over the anchors' source
    rows makes the rows.
    intercept: the constant coordinate c appended to every helper vector (0: none), so the map is affine; it adds
    c^2 to every entry of the Gram matrix and to every projection.
    Returns indices (n, k) into the anchors, coefficients (n, k) float32 and (n,) neighbour counts. Unused neighbour
    slots get coefficient zero (zero rows of the Gram matrix leave the minimum-norm solution unchanged).
    """
    # The support beyond max_neighbours is never used: its largest weights are its largest similarities.
    weights, indices = top_sparsemax((unit_rows(queries) @ unit_rows(anchors).T) / temperature, max_neighbours, exact=False)
    counts = (weights > 0).sum(1)
    k = int(min(max_neighbours, max(int(counts.max()), 1), weights.shape[1]))
    weights, indices = weights[:, :k], indices[:, :k]  # top_sparsemax returns them largest first
    selected = (weights > 0).unsqueeze(2)
    neighbour_vectors = anchors[indices].double() * selected  # (n, k, m)
    gram = neighbour_vectors @ neighbour_vectors.transpose(1, 2)  # (n, k, k)
    projections = neighbour_vectors @ queries.double().unsqueeze(2)  # (n, k, 1) = E'_t q
    if intercept:  # a constant helper coordinate c on every vector: the map becomes affine, x W + b
        constant = selected.double() * intercept
        gram = gram + constant @ constant.transpose(1, 2)
        projections = projections + constant * intercept
    coefficients = min_norm_coefficients(gram, projections, ridge).squeeze(2) * selected.squeeze(2)  # (n, k)
    return indices, coefficients.float(), counts.clamp_max(max_neighbours)


def salt_coefficients(queries: torch.Tensor, anchors: torch.Tensor, temperature: float, max_neighbours: int,
                      ridge: float, intercept: float) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """The role- and column-independent part: :func:`neighbourhood_coefficients` of each chunk of CHUNK queries,
    with ``intercept`` as a multiple of the anchors' RMS helper norm."""
    intercept_value = float(intercept * anchors.double().pow(2).sum(1).mean().sqrt()) if intercept else 0.0
    return [neighbourhood_coefficients(queries[start : start + CHUNK], anchors, temperature, max_neighbours, ridge,
                                       intercept_value)
            for start in range(0, len(queries), CHUNK)]


@register_initializer("salt", needs_helper=True, helpers=HELPERS, columnwise=True)
def salt(
    problem: InitProblem, *, temperature: float = 1.0, max_neighbours: int = 64, min_neighbours: int = 1,
    ridge: float = 1.0, intercept: float = 1.0,
) -> torch.Tensor:
    """(N, hidden): each new token projected by its own least-squares map fitted on its sparsemax neighbours.

    temperature: divides the cosine similarities before sparsemax (1.0: sparsemax of the raw similarities, as in
        the paper); higher keeps more neighbours.
    max_neighbours: the most neighbours one map is fitted on (the largest sparsemax weights are kept).
    min_neighbours: tokens with fewer neighbours, or without a helper vector, get a random row from N(mu, sigma^2),
        drawn column by column (``columnwise_gaussian_rows``).
    ridge: Tikhonov term, a fraction of the mean diagonal of each neighbourhood's Gram matrix. The paper's plain
        pseudo-inverse (ridge -> 0) interpolates the neighbours exactly, and when their helper vectors are nearly
        collinear the coefficients explode: on SmolLM2-135M with the demo's Italian tokenizer and the fastText
        helper (dozens of sparsemax neighbours in 100 dimensions), ridge 1e-9 gave 529 of 13,311 rows above 5x the
        mean source norm (max 448 vs 3.2) and 82 bits per byte zero-shot.
    intercept: a constant helper coordinate, as a multiple of the shared tokens' RMS helper norm, appended to every
        helper vector (0: the paper's linear map). It makes each map affine, x W + b: the row becomes a combination
        of the neighbours' source rows whose coefficients are pulled towards summing to one (the more, the larger
        the intercept), so it keeps the source rows' common component instead of shrinking towards the origin when the new token's vector lies outside its
        neighbours' span (always, with fewer neighbours than helper dimensions).

    Defaults from ``benchmarks/salt_study.py`` (BENCHMARKS.md): Italian held-out bits per byte zero-shot
    9.90 with (ridge 1e-2, no intercept), 3.76 with (1.0, none), 3.14 with (1.0, 1.0), the best of the grid and
    ahead of FVT's 3.28; temperature and max_neighbours moved it by less than 0.1.
    """
    if temperature <= 0 or max_neighbours < 1 or min_neighbours < 1 or ridge < 0 or intercept < 0:
        raise ValueError(
            "salt needs temperature > 0, max_neighbours >= 1, min_neighbours >= 1, ridge >= 0 and intercept >= 0"
        )
    anchors, anchor_sources, queries, has_vector = helper_anchors(problem, "salt")
    overlap_targets, overlap_sources = overlap_pairs(problem)
    key = (ids_key(problem.new_target_ids), ids_key(overlap_targets), ids_key(overlap_sources), temperature,
           max_neighbours, ridge, intercept)
    chunks = _COEFFICIENTS.get((problem.helper, problem.target_tokenizer), key, lambda: salt_coefficients(
        queries, anchors, temperature, max_neighbours, ridge, intercept))
    rows = torch.empty(len(queries), problem.source_matrix.shape[1], dtype=torch.float32)
    enough = has_vector.clone()
    for index, (indices, coefficients, counts) in enumerate(chunks):
        start = index * CHUNK
        rows[start : start + CHUNK] = mix_rows(problem, anchor_sources, indices, coefficients)
        enough[start : start + CHUNK] &= counts >= min_neighbours
    if not bool(enough.all()):
        rows[~enough] = columnwise_gaussian_rows(problem, int((~enough).sum()))
    return rows
