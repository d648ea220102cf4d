"""OMP (mergekit tokensurgeon v2, arXiv 2506.06607): each new token's helper vector is approximated by orthogonal
matching pursuit over the shared tokens' helper vectors, and the same coefficients combine those tokens' source
rows (recovery-and-new-initialisers §2).

Registered ``columnwise``: the pursuit reads only the helper, so column j of every row is a combination of column j
of source rows, and checkpoint surgery streams it a column block at a time (the pursuit runs once, for the first
block, and is reused by the others and by the LM head)."""

from __future__ import annotations

import torch

from vocadapt.components.errors import UserError
from vocadapt.components.initializers import InitProblem, register_initializer
from vocadapt.components.initializers._common import (
    helper_rows,
    ids_key,
    mix_rows,
    overlap_pairs,
    require_helper,
)
from vocadapt.components.initializers.fvt import UNSEEN_RULES, unseen_rows
from vocadapt.components.last_result_cache import LastResultCache

HELPERS = ("model", "vectors", "fasttext")
# Queries per batched pursuit: the (n, k, d) orthonormal basis and the (n, O) correlations stay under 2^26 floats
# (256 MB in float32) each. Large batches matter on a busy 2-core machine: with 512 queries (d = 100, O = 4,500)
# the element-wise steps on (512, 100) tensors took as long as the correlation product with two threads.
BATCH_FLOATS = 1 << 26
_PURSUITS = LastResultCache()


def batch_omp(targets: torch.Tensor, atoms: torch.Tensor, k: int, tolerance: float = 1e-6
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """Orthogonal matching pursuit for a batch of targets at once.

    targets: (n, d) vectors to approximate; atoms: (O, d) candidates (not normalised, as in tokensurgeon).
    k: atoms per target, k <= O.
    Returns (indices (n, k) int64 into ``atoms``, coefficients (n, k)) in the dtype of ``targets`` with
    ``targets[i] ~= coefficients[i] @ atoms[indices[i]]``, the least-squares fit on the selected atoms.

    Each step picks, for every target at once, the unused atom with the largest |<residual, atom>|, extends a
    Gram-Schmidt QR of the selected atoms (orthogonalised twice: a single classical pass loses orthogonality when
    atoms are nearly collinear, and a second one restores it to rounding) and sets the residual to t - Q Q^T t;
    finally c = R^-1 Q^T t, tokensurgeon's least squares without its full re-QR every 256 steps. An atom that
    lies in the span of those already selected (possible once the residual is zero) gets an empty basis row and
    coefficient zero instead of a division by a vanishing norm.
    """
    count, dimension = targets.shape
    rows = torch.arange(count)
    basis = torch.zeros(count, k, dimension, dtype=targets.dtype)  # row t: the t-th orthonormal direction
    triangle = torch.zeros(count, k, k, dtype=targets.dtype)
    coordinates = torch.zeros(count, k, dtype=targets.dtype)  # Q^T t
    indices = torch.zeros(count, k, dtype=torch.long)
    used = torch.zeros(count, atoms.shape[0], dtype=torch.bool)
    residuals = targets.clone()
    for step in range(k):
        correlation = torch.mm(residuals, atoms.T).abs_().masked_fill_(used, -1.0)
        chosen = correlation.argmax(dim=1)
        indices[:, step] = chosen
        used[rows, chosen] = True
        new_atom = atoms[chosen]  # (n, d)
        previous = basis[:, :step]  # (n, step, d), contiguous
        projection = torch.zeros(count, step, dtype=targets.dtype)
        orthogonal = new_atom
        for _ in range(2):
            part = torch.bmm(previous, orthogonal.unsqueeze(2)).squeeze(2)  # (n, step)
            orthogonal = orthogonal - torch.bmm(part.unsqueeze(1), previous).squeeze(1)
            projection += part
        norm = orthogonal.norm(dim=1)
        independent = norm > tolerance * new_atom.norm(dim=1).clamp_min(torch.finfo(targets.dtype).tiny)
        safe_norm = torch.where(independent, norm, torch.ones_like(norm))
        direction = orthogonal * (independent / safe_norm).unsqueeze(1)
        basis[:, step] = direction
        triangle[:, :step, step] = projection * independent.unsqueeze(1)
        triangle[:, step, step] = safe_norm
        coordinates[:, step] = (direction * targets).sum(1)
        residuals -= direction * coordinates[:, step : step + 1]  # t - Q Q^T t, one direction at a time
    coefficients = torch.linalg.solve_triangular(triangle, coordinates.unsqueeze(2), upper=True).squeeze(2)
    return indices, coefficients


def _pursue(queries: torch.Tensor, anchors: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """batch_omp over every query, in batches that keep the basis and the correlations inside BATCH_FLOATS."""
    batch = max(1, min(4096, BATCH_FLOATS // max(1, anchors.shape[1] * k), BATCH_FLOATS // max(1, anchors.shape[0])))
    indices = torch.zeros(queries.shape[0], k, dtype=torch.long)
    coefficients = torch.zeros(queries.shape[0], k, dtype=torch.float32)
    for start in range(0, queries.shape[0], batch):
        chunk = slice(start, start + batch)
        indices[chunk], coefficients[chunk] = batch_omp(queries[chunk], anchors, k)
    return indices, coefficients


DEFAULT_K = 64  # tokensurgeon's default


def effective_k(k: int | None, anchors: int, helper_dimension: int) -> int:
    """The atoms per new token: an explicit ``k`` as written, else a default that adapts to the helper.

    The default is tokensurgeon's 64 capped at the number of shared tokens with a helper vector and at a quarter
    of the helper's dimension: with k near or above the dimension the residual is already zero and the extra atoms
    fit nothing but rounding (tokensurgeon's notes report exploding coefficients for k = 128 in a 100-dimensional
    donor, and ask for k much smaller than d). A quarter keeps 64 for any donor model from d = 256 up and gives 25
    for a 100-dimensional fastText helper, which also halves the pursuit's time against half the dimension
    (BENCHMARKS.md). An explicit k is never changed: one above the shared tokens or the helper's dimension cannot
    be used as written and is refused with the reason.
    """
    if k is None:
        return max(1, min(DEFAULT_K, anchors, helper_dimension // 4))
    if k > anchors:
        raise UserError(f"omp option k={k}: only {anchors:,} shared tokens have a helper vector, so a pursuit cannot "
                        f"pick {k} atoms; give k <= {anchors:,}, or leave k out for the default (64 capped at the "
                        "shared tokens and a quarter of the helper's dimension)")
    if k > helper_dimension:
        raise UserError(f"omp option k={k}: the helper's vectors have {helper_dimension} dimensions, so after "
                        f"{helper_dimension} atoms the residual is zero and further atoms fit only rounding "
                        f"(exploding coefficients); give k <= {helper_dimension}, or leave k out for the default")
    return k


@register_initializer("omp", needs_helper=True, helpers=HELPERS, columnwise=True)
def omp(problem: InitProblem, *, k: int | None = None, unseen: str = "random") -> torch.Tensor:
    """(N, hidden): row i = sum_j c_ij source_matrix[s_j], where helper(t_i) ~= sum_j c_ij helper(shared_j) is the
    k-atom orthogonal matching pursuit of the new token's helper vector over the shared tokens' helper vectors.

    k: atoms per new token, used as written (or refused, :func:`effective_k`); None (the default) is
        tokensurgeon's 64 adapted to the helper. The coefficients are
        unconstrained least squares (no sum-to-one), as in tokensurgeon.
    The pursuit reads only the helper, so an untied model's LM head reuses the input embeddings' pursuit and
    applies its coefficients to the head's own source rows. A new token without a helper vector gets a random row
    from N(mu, sigma^2), as in the other helper methods, drawn column by column (``columnwise_gaussian_rows``);
    tokensurgeon writes zero rows for tokens the donor lacks. ``unseen="fvt"`` gives such a token its FVT row.
    """
    if (k is not None and k < 1) or unseen not in UNSEEN_RULES:
        raise ValueError(f"omp needs k >= 1 and unseen {'|'.join(UNSEEN_RULES)}, got {k} and {unseen!r}")
    helper = require_helper(problem, "omp")
    overlap_targets, overlap_sources = overlap_pairs(problem)
    anchors, anchor_known = helper_rows(helper, overlap_targets)
    if not bool(anchor_known.any()):
        raise ValueError(
            "omp found no shared token with a helper vector; check that the helper uses the target tokenizer"
        )
    anchors, anchor_sources = anchors[anchor_known], overlap_sources[anchor_known]
    queries, has_vector = helper_rows(helper, problem.new_target_ids)
    atoms_per_token = effective_k(k, anchors.shape[0], anchors.shape[1])
    problem.notes["k"] = atoms_per_token  # the records show the k used, adapted or as written

    def compute() -> tuple[torch.Tensor, torch.Tensor]:
        return _pursue(queries[has_vector], anchors, atoms_per_token)

    key = (ids_key(problem.new_target_ids), ids_key(overlap_targets[anchor_known]), atoms_per_token)
    indices, coefficients = _PURSUITS.get((helper, problem.target_tokenizer), key, compute)
    rows = torch.empty(len(problem.new_target_ids), problem.source_matrix.shape[1], dtype=torch.float32)
    if bool(has_vector.any()):  # the rows of the atoms each token uses, never all the shared tokens' rows
        rows[has_vector] = mix_rows(problem, anchor_sources, indices, coefficients)
    if not bool(has_vector.all()):
        rows[~has_vector] = unseen_rows(problem, ~has_vector, unseen)
    return rows
