"""Pieces shared by several initialisers: the overlap as tensors, Gaussian fallback rows, helper vectors, similarity.

Not a method (the leading underscore keeps the registry from importing it as one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from vocadapt.components.initializers import InitProblem, MissingHelperError, get_initializer, read_source_rows

# Rows of the (new x overlap) similarity matrix handled at once: 2,048 x 20,000 float32 is 160 MB, which keeps
# FOCUS, CLP and SALT inside the 4 GB budget of the 8B benchmark.
SIMILARITY_CHUNK_ROWS = 2048


def overlap_pairs(problem: InitProblem) -> tuple[torch.Tensor, torch.Tensor]:
    """The overlap as two aligned (O,) int64 tensors (target ids, source ids), sorted by target id.

    Only pairs whose source id has a row in ``problem.source_matrix`` are kept.
    """
    rows = problem.source_matrix.shape[0]
    target_ids = torch.tensor(list(problem.overlap.keys()), dtype=torch.long)
    source_ids = torch.tensor(list(problem.overlap.values()), dtype=torch.long)
    inside = (source_ids >= 0) & (source_ids < rows)
    target_ids, source_ids = target_ids[inside], source_ids[inside]
    order = torch.argsort(target_ids)  # target ids are the mapping's keys: unique, so the order is total
    return target_ids[order], source_ids[order]


# Columns whose statistics are computed at once, from a float32 copy laid out column by column: 128,256 rows x 256
# columns is 131 MB, where a float32 copy of the whole 128,256 x 4,096 matrix is 2.1 GB.
STATISTICS_COLUMNS = 256
# Rows transposed into that copy at once: 512 x 256 bf16 is 256 KB, which stays in the core's cache while it is
# written out column by column. Larger pieces miss it: 8,192 rows took 1.4 to 1.9 times as long (per matrix,
# 262,208 x 2,560: 6.7 -> 4.3 s; 128,256 x 4,096: 6.5 -> 4.7 s; 129,280 x 7,168: 10.4 -> 5.5 s; the same bits), and
# transposing the whole column block in one copy took twice as long again.
STATISTICS_ROWS = 512


def source_mean_std(source_matrix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-dimension mean and standard deviation of the source rows, (hidden,) each, float32.

    Computed STATISTICS_COLUMNS columns at a time, each copied to float32 with its columns as rows (STATISTICS_ROWS
    rows at a time) and reduced along them: the same values, bit for bit, as ``torch.std_mean(matrix.float(),
    dim=0)`` (torch reduces each column in the same order either way), 4.6x faster (15.6 s -> 3.4 s for 128,256 x
    512 under load 20 on 2 cores: the reduction down the columns of a row-major matrix does not vectorise), and never
    a float32 copy of the whole matrix. Column j's values depend on column j only, so a streamed column block gets
    them too.
    """
    rows, hidden = source_matrix.shape
    mean = torch.empty(hidden, dtype=torch.float32)
    std = torch.empty(hidden, dtype=torch.float32)
    for first in range(0, hidden, STATISTICS_COLUMNS):
        columns = source_matrix[:, first : first + STATISTICS_COLUMNS]
        by_column = torch.empty(columns.shape[1], rows, dtype=torch.float32)
        for row in range(0, rows, STATISTICS_ROWS):
            by_column[:, row : row + STATISTICS_ROWS].copy_(columns[row : row + STATISTICS_ROWS].T)
        std[first : first + STATISTICS_COLUMNS], mean[first : first + STATISTICS_COLUMNS] = torch.std_mean(
            by_column, dim=1)
    return mean, std


def gathered_rows(problem: InitProblem, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The float32 source rows ``ids`` name, each once, and ``ids`` renumbered into them (same shape).

    For a method that sums source rows (``embedding_bag``, a sparse product): it reads the few rows it uses
    instead of a float32 copy of the whole source matrix (2.1 GB at Llama-3.1-8B's 128,256 x 4,096). The rows keep
    their order (``torch.unique`` sorts), so every bag sums the same values in the same order as over the whole
    matrix: the same bytes.
    """
    unique, inverse = torch.unique(ids, sorted=True, return_inverse=True)
    return read_source_rows(problem, unique), inverse.reshape(ids.shape)


def gaussian_rows(source_matrix: torch.Tensor, count: int, generator: torch.Generator) -> torch.Tensor:
    """(count, hidden) rows drawn from N(mu, sigma^2) with the source's per-dimension mean and std."""
    mean, std = source_mean_std(source_matrix)
    rows = torch.randn(count, source_matrix.shape[1], generator=generator, dtype=torch.float32)
    return rows.mul_(std).add_(mean)  # in place: no second (count, hidden) buffer


# Fallback rows whose standard normal draws share one generator in columnwise_gaussian_rows: the full-width draws
# of a chunk (256 x 8,192 float32 at 70B shape: 8 MB) are all that is held besides the block's rows.
FALLBACK_CHUNK_ROWS = 256


def columnwise_gaussian_rows(problem: InitProblem, count: int) -> torch.Tensor:
    """(count, width) rows from N(mu, sigma^2) with the per-column mean and std of ``problem.source_matrix``, whose
    values in column j are the same whether the matrix is whole or a column block (``problem.columns``).

    For a ``columnwise`` method's fallback rows (a token with no source piece, no word vector, no helper vector):
    :func:`gaussian_rows` draws (count, width) normals in row-major order, so a block of 1,024 columns would get
    other values than the same columns of the whole matrix. Here one seed per chunk of FALLBACK_CHUNK_ROWS rows
    comes from the problem's generator, each chunk draws its rows at the full hidden size and keeps the block's
    columns: the draws, the mean and the std of column j depend on column j only.
    """
    block_width = problem.source_matrix.shape[1]
    first, hidden = problem.columns or (0, block_width)
    mean, std = source_mean_std(problem.source_matrix)
    chunks = -(-count // FALLBACK_CHUNK_ROWS)
    seeds = torch.randint(0, 2**62, (chunks,), generator=problem.generator, dtype=torch.int64).tolist()
    rows = torch.empty(count, block_width, dtype=torch.float32)
    for chunk, seed in enumerate(seeds):
        part = slice(chunk * FALLBACK_CHUNK_ROWS, min(count, (chunk + 1) * FALLBACK_CHUNK_ROWS))
        draws = torch.randn(part.stop - part.start, hidden, generator=torch.Generator().manual_seed(seed))
        rows[part] = draws[:, first : first + block_width]
    return rows.mul_(std).add_(mean)


def require_helper(problem: InitProblem, method: str) -> Any:
    """The helper of ``problem``, or a MissingHelperError naming the helpers ``method`` accepts."""
    if problem.helper is None:
        raise MissingHelperError(get_initializer(method))
    return problem.helper


def helper_rows(helper: Any, target_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Helper vectors of ``target_ids``: ((n, d) float32, (n,) bool "has a vector")."""
    vectors = helper.vectors
    known = helper.known
    inside = target_ids < vectors.shape[0]
    safe_ids = torch.where(inside, target_ids, torch.zeros_like(target_ids))
    rows = vectors[safe_ids].float()
    has_vector = known[safe_ids] & inside
    return rows * has_vector.unsqueeze(1), has_vector


def unit_rows(matrix: torch.Tensor) -> torch.Tensor:
    """Rows scaled to length one (zero rows stay zero)."""
    return torch.nn.functional.normalize(matrix.float(), dim=1)


def chunked_similarity_mix(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    weigh: Callable[[torch.Tensor], torch.Tensor],
    sparse: bool = False,
) -> torch.Tensor:
    """For each query, ``weigh(cosine(query, keys)) @ values``, in row chunks.

    queries: (N, d); keys: (O, d); values: (O, hidden); weigh maps (n, O) similarities to (n, O) weights;
    sparse: ``weigh`` returns only each row's non-zero weights and their key indices, (n, k) each (sparsemax);
        the k source rows are gathered and summed instead of a dense (n, O) product.
    Returns (N, hidden).
    """
    unit_keys = unit_rows(keys)
    out = torch.empty(queries.shape[0], values.shape[1], dtype=torch.float32)
    for start in range(0, queries.shape[0], SIMILARITY_CHUNK_ROWS):
        similarity = unit_rows(queries[start : start + SIMILARITY_CHUNK_ROWS]) @ unit_keys.T
        if sparse:  # weigh returns (values, indices) of the non-zeros
            weights, indices = weigh(similarity)
            out[start : start + SIMILARITY_CHUNK_ROWS] = torch.nn.functional.embedding_bag(
                indices, values, per_sample_weights=weights.to(values.dtype), mode="sum"
            )
        else:
            out[start : start + SIMILARITY_CHUNK_ROWS] = weigh(similarity) @ values
    return out


def top_sparsemax(scores: torch.Tensor, k: int = 64, exact: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Sparsemax of each row of (n, O) scores as its non-zeros: (values (n, k'), indices (n, k')), largest first,
    zeros padded.

    Sparsemax's support is a prefix of the sorted scores, so it is computed exactly on each row's top k; a row
    whose whole top k is in the support (the support may go on) is recomputed over all its scores, unless
    ``exact`` is False (the caller keeps at most k anyway). One top-k pass replaces a full sort of ~20,000 scores
    per token.
    """
    from entmax import sparsemax

    k = min(k, scores.shape[1])
    top = torch.topk(scores, k, dim=1)
    weights = sparsemax(top.values, dim=-1)
    full_rows = (weights > 0).all(dim=1) & (k < scores.shape[1]) & exact
    if bool(full_rows.any()):
        dense = sparsemax(scores[full_rows], dim=-1)
        support = int((dense > 0).sum(1).max())
        wide = torch.topk(dense, max(support, k), dim=1)
        padded_values = torch.zeros(scores.shape[0], wide.values.shape[1], dtype=scores.dtype)
        # a row padded past its k pairs gets its next-best scores' indices at weight 0, never a repeated index (an
        # index 0 there overwrote the row's best weight when the pairs were scattered back into a dense row)
        padded_indices = torch.topk(scores, wide.values.shape[1], dim=1).indices
        padded_values[:, :k], padded_indices[:, :k] = weights, top.indices
        padded_values[full_rows], padded_indices[full_rows] = wide.values, wide.indices
        return padded_values, padded_indices
    return weights, top.indices


def ids_key(ids: torch.Tensor) -> tuple[int, ...]:
    """A hashable key for a 1-D id tensor."""
    return tuple(ids.tolist())


def helper_anchors(
    problem: InitProblem, method: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """What the similarity methods (clp, focus, salt) share: the helper's vectors of the overlapping tokens that
    have one, their source ids, and the helper's vectors of the new tokens.

    Returns anchors (A, h_helper), anchor_sources (A,) int64 source ids, queries (N, h_helper) and has_vector (N,)
    bool. The anchors' source rows are not read here: in an expansion every source token is an anchor, and their
    float32 rows are the size of the whole matrix (2.1 GB at Llama-3.1-8B's); a method reads the ones it mixes
    (:func:`gathered_rows`).
    """
    helper = require_helper(problem, method)
    overlap_targets, overlap_sources = overlap_pairs(problem)
    anchor_vectors, anchor_known = helper_rows(helper, overlap_targets)
    if not bool(anchor_known.any()):
        raise ValueError(
            f"{method} found no shared token with a helper vector; check that the helper uses the target tokenizer"
        )
    queries, has_vector = helper_rows(helper, problem.new_target_ids)
    return anchor_vectors[anchor_known], overlap_sources[anchor_known], queries, has_vector


def mix_rows(problem: InitProblem, sources: torch.Tensor, indices: torch.Tensor, weights: torch.Tensor
             ) -> torch.Tensor:
    """(n, hidden) float32: row i = sum_j weights[i, j] * source row of ``sources[indices[i, j]]``, one weighted
    ``embedding_bag`` over the rows it names (read once each, :func:`gathered_rows`). indices, weights: (n, k)."""
    rows, index = gathered_rows(problem, sources[indices])
    return torch.nn.functional.embedding_bag(index, rows, per_sample_weights=weights.to(rows.dtype), mode="sum")
