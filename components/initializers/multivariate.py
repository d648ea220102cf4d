"""Multivariate: new rows from a Gaussian with the source mean and full covariance (SALT §4.2, its baseline).

Registered ``row_blocks``: a row's columns all come from one (hidden x hidden) covariance, so the method cannot run on
column blocks; it reads the source rows it samples 4,096 at a time and yields its draws 4,096 rows at a time, so
streamed surgery holds the covariance and its Cholesky factor (float64, 0.5 GiB each at hidden 8,192), never the
vocabulary-sized matrices (8.2 GB at Llama-3.1-70B's shape before, BENCHMARKS.md "Bounded memory").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch

from vocadapt.components.initializers import InitProblem, read_source_rows, register_initializer

CHUNK_ROWS = 4096  # source rows read, and new rows drawn, at once: 128 MiB of float32 at hidden 8,192
TRIANGLE_BLOCKS = 8  # column blocks of the triangular products (the scatter matrix, the draws through the factor)


def column_bounds(hidden: int, parts: int = TRIANGLE_BLOCKS) -> list[tuple[int, int]]:
    """``parts`` column ranges covering ``hidden`` (fewer when hidden is small)."""
    step = max(1, -(-hidden // parts))
    return [(start, min(hidden, start + step)) for start in range(0, hidden, step)]


def source_mean_covariance(blocks: Iterable[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean (hidden,) and the lower triangle of the covariance (hidden, hidden; the strict upper triangle is zero,
    as ``cholesky`` and ``eigh`` read only the lower one) of the rows of ``blocks`` (float32 row blocks),
    accumulated in float64 from float32 block products, so no copy of all the rows is ever centred at once.

    Only the block rows of the lower triangle are multiplied (block row j against columns up to its end): 56% of
    the full product's work at TRIANGLE_BLOCKS = 8."""
    total = scatter = bounds = None
    rows = 0
    for block in blocks:
        if scatter is None:
            total = torch.zeros(block.shape[1], dtype=torch.float64)
            scatter = torch.zeros(block.shape[1], block.shape[1], dtype=torch.float64)
            bounds = column_bounds(block.shape[1])
        rows += block.shape[0]
        total += block.sum(0, dtype=torch.float64)
        for first, last in bounds:  # float32 products: float64 ones are ~10x slower on CPU
            scatter[first:last, :last] += (block[:, first:last].T @ block[:, :last]).double()
    if scatter is None:
        raise ValueError("multivariate needs at least one source row")
    mean = total / max(rows, 1)
    scatter.addr_(mean, mean, alpha=-rows).div_(max(rows - 1, 1))
    return mean, scatter.tril_()


def sampled_row_ids(rows: int, max_rows: int) -> torch.Tensor:
    """At most ``max_rows`` evenly spaced ids of ``rows`` (0: all of them)."""
    if 0 < max_rows < rows:
        return torch.linspace(0, rows - 1, max_rows).long()
    return torch.arange(rows)


@register_initializer("multivariate", row_blocks=True)
def multivariate(problem: InitProblem, *, jitter: float = 1e-5, max_rows: int = 32768) -> Iterator[torch.Tensor]:
    """(N, hidden) rows drawn from N(mean, covariance) of the source rows, yielded CHUNK_ROWS at a time.

    jitter: added to the diagonal, relative to the mean variance, so the Cholesky factor exists when the source
        covariance is singular (fewer rows than dimensions, or padding rows that are all zero).
    max_rows: estimate mean and covariance from at most this many evenly spaced source rows (0: all). At
        128,256 x 4,096 the full scatter matrix is 2.1 TFLOP; 32,768 rows (8 per dimension) cost a quarter.
    """
    ids = sampled_row_ids(problem.source_matrix.shape[0], max_rows)
    chunks = (read_source_rows(problem, ids[start : start + CHUNK_ROWS]) for start in range(0, len(ids), CHUNK_ROWS))
    mean, covariance = source_mean_covariance(chunks)
    hidden = covariance.shape[0]
    scale = covariance.diagonal().mean().clamp_min(1e-12)
    jittered = covariance.clone()
    jittered.diagonal().add_(jitter * scale)  # the same values as adding jitter * scale * I, without two more copies
    factor, info = torch.linalg.cholesky_ex(jittered)
    del jittered
    triangular = int(info) == 0
    if not triangular:  # still not positive definite: fall back to the symmetric square root (a full matrix)
        eigenvalues, eigenvectors = torch.linalg.eigh(covariance)
        factor = eigenvectors * eigenvalues.clamp_min(0).sqrt()
    del covariance
    factor_t, mean32 = factor.T.float().contiguous(), mean.float()  # upper triangular when Cholesky's
    del factor
    bounds = column_bounds(hidden) if triangular else [(0, hidden)]
    count = len(problem.new_target_ids)
    for start in range(0, count, CHUNK_ROWS):  # float32: a float64 (32K x 4,096) @ (4,096 x 4,096) takes minutes
        noise = torch.randn(min(CHUNK_ROWS, count - start), hidden, generator=problem.generator, dtype=torch.float32)
        rows = mean32.expand(noise.shape[0], hidden).clone()
        for first, last in bounds:  # column j of noise @ factor_t needs noise's columns up to j only (triangular)
            rows[:, first:last] += noise[:, :last] @ factor_t[:last, first:last]
        yield rows
