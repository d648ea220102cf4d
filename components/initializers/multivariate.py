"""Multivariate: new rows from a Gaussian with the source mean and full covariance (SALT §4.2, its baseline)."""

from __future__ import annotations

import torch

from vocadapt.components.initializers import InitProblem, register_initializer


def source_mean_covariance(source_matrix: torch.Tensor, chunk_rows: int = 4096) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean (hidden,) and covariance (hidden, hidden) of the given rows, accumulated in float64 from float32
    chunk products.

    Chunked so an 128K x 4,096 matrix is never centred as a whole (that copy alone would be 2 GB).
    """
    rows, hidden = source_matrix.shape
    total = torch.zeros(hidden, dtype=torch.float64)
    scatter = torch.zeros(hidden, hidden, dtype=torch.float64)
    for start in range(0, rows, chunk_rows):
        block = source_matrix[start : start + chunk_rows].float()
        total += block.sum(0, dtype=torch.float64)
        scatter += (block.T @ block).double()  # float32 products: float64 ones are ~10x slower on CPU
    mean = total / max(rows, 1)
    covariance = (scatter - rows * torch.outer(mean, mean)) / max(rows - 1, 1)
    return mean, (covariance + covariance.T) / 2


@register_initializer("multivariate")
def multivariate(problem: InitProblem, *, jitter: float = 1e-5, max_rows: int = 32768) -> torch.Tensor:
    """(N, hidden) rows drawn from N(mean, covariance) of the source rows.

    jitter: added to the diagonal, relative to the mean variance, so the Cholesky factor exists when the source
        covariance is singular (fewer rows than dimensions, or padding rows that are all zero).
    max_rows: estimate mean and covariance from at most this many evenly spaced source rows (0: all). At
        128,256 x 4,096 the full scatter matrix is 2.1 TFLOP; 32,768 rows (8 per dimension) cost a quarter.
    """
    source = problem.source_matrix
    if 0 < max_rows < source.shape[0]:
        source = source[torch.linspace(0, source.shape[0] - 1, max_rows).long()]
    mean, covariance = source_mean_covariance(source)
    hidden = covariance.shape[0]
    scale = covariance.diagonal().mean().clamp_min(1e-12)
    factor, info = torch.linalg.cholesky_ex(covariance + jitter * scale * torch.eye(hidden, dtype=torch.float64))
    if int(info) != 0:  # still not positive definite: fall back to the symmetric square root
        eigenvalues, eigenvectors = torch.linalg.eigh(covariance)
        factor = eigenvectors * eigenvalues.clamp_min(0).sqrt()
    count = len(problem.new_target_ids)
    rows = torch.empty(count, hidden, dtype=torch.float32)
    factor_t, mean32 = factor.T.float().contiguous(), mean.float()
    for start in range(0, count, 4096):  # float32 blocks: a float64 (32K x 4,096) @ (4,096 x 4,096) takes minutes
        noise = torch.randn(min(4096, count - start), hidden, generator=problem.generator, dtype=torch.float32)
        rows[start : start + 4096] = mean32 + noise @ factor_t
    return rows
