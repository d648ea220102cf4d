"""SAVA: an affine map from the helper's embedding space to the source's, fitted on the shared tokens and applied
to the new ones (SAVA §3.1 eq. 1 and Appendix A).

The default normalisation is the authors' (Appendix A, with latentis: ``StandardScaling`` then ``MeanLPNorm`` on both
sides), checked against rows made by latentis' ``Translator`` with the authors' ``SGDAffineAligner`` settings in
tests/initializers/test_authors_reference.py; the closed-form least squares stands in for the 1,000 Adam steps
(exact, deterministic, and at 8B shape far cheaper on a CPU) and gives the same rows to a centred cosine of 0.997 or
more on that case. ``normalise="paired"`` is the variant vocadapt shipped before; BENCHMARKS.md ("Initialiser
defaults vs the authors' code") compares the two.

Registered ``row_blocks``, not ``columnwise``: column j of a row depends on every column (the default normalisation
divides each shared token's standardised source row by its L2 norm over the whole hidden size), so the method reads
the shared tokens' source rows CHUNK_ROWS at a time instead, in three passes (their per-column mean, their spread,
then their row norms and the least-squares right-hand side), and yields the mapped rows CHUNK_ROWS new tokens at a
time. The closed form is solved through a QR factorisation of the helper side, [x, 1] = QR, W = lstsq(R, Q^T T),
whose Q^T T sums over row chunks: the solution of lstsq([x, 1], T) without ever holding T, the (shared x hidden)
targets. What it holds is the helper side and the (helper + 1) x hidden map, never a vocabulary-sized source
matrix (it held whole matrices before: 8.9 GB at Llama-3.1-70B's shape, BENCHMARKS.md "Bounded memory"). The
"sgd" solver (latentis' aligner) still gathers the shared rows whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch

from vocadapt.components.initializers import InitProblem, read_source_rows, register_initializer
from vocadapt.components.initializers._common import helper_rows, overlap_pairs, require_helper

HELPERS = ("model", "fasttext", "vectors")
CHUNK_ROWS = 4096  # source rows read, and new rows yielded, at once: 128 MiB of float32 at hidden 8,192


@dataclass
class StandardScaler:
    """Per-dimension standard scaling fitted on the shared tokens; ``inverse`` undoes it."""

    mean: torch.Tensor  # (d,)
    std: torch.Tensor  # (d,)

    @classmethod
    def fit(cls, rows: torch.Tensor) -> "StandardScaler":
        return cls(rows.mean(0), rows.std(0).clamp_min(1e-8))

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        return (rows - self.mean) / self.std

    def inverse(self, rows: torch.Tensor) -> torch.Tensor:
        return rows * self.std + self.mean


def l2_norms(scaled: torch.Tensor) -> torch.Tensor:
    """(n, 1) row L2 norms, the divisors of the L2 normalisation (Appendix A).

    With normalise="paired" both sides of a pair are divided by the helper row's norm, so an affine relation stays
    exactly linear and the inverse multiplies each new token by its own helper norm; with "independent" each side
    is divided by its own norms, as latentis' MeanLPNorm does (the authors' setting), and the inverse multiplies by
    the mean source norm. On a planted affine map (8 -> 16 dims, 300 shared tokens) "independent" recovers rows to
    cosine 0.988 at worst, "paired" to 1.0.
    """
    return scaled.norm(dim=1, keepdim=True).clamp_min(1e-12)


def fit_affine_lstsq(inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Closed-form least squares for y = [x, 1] W: inputs (O, m), targets (O, n) -> W (m + 1, n), in float64."""
    design = torch.cat([inputs, torch.ones(inputs.shape[0], 1, dtype=inputs.dtype)], dim=1).double()
    return torch.linalg.lstsq(design, targets.double()).solution


class ChunkedAffineLstsq:
    """lstsq([x, 1], T) with T given in row chunks: [x, 1] = QR (reduced), Q^T T summed chunk by chunk, then
    W = lstsq(R, Q^T T). The same least-squares solution (the minimum-norm one when [x, 1] lacks rank) as
    :func:`fit_affine_lstsq`, without T whole."""

    def __init__(self, inputs: torch.Tensor, width: int) -> None:
        design = torch.cat([inputs, torch.ones(inputs.shape[0], 1, dtype=inputs.dtype)], dim=1).double()
        self.q, self.r = torch.linalg.qr(design)
        self.qt_targets = torch.zeros(self.q.shape[1], width, dtype=torch.float64)

    def add(self, first: int, targets: torch.Tensor) -> None:
        """Rows ``first ..`` of T."""
        self.qt_targets += self.q[first : first + targets.shape[0]].T @ targets.double()

    def solution(self) -> torch.Tensor:
        return torch.linalg.lstsq(self.r, self.qt_targets).solution


def apply_affine(weights: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
    return (inputs.double() @ weights[:-1] + weights[-1]).float()


def _sgd_map(inputs: torch.Tensor, targets: torch.Tensor, new_inputs: torch.Tensor, steps: int, lr: float, seed: int):
    """The paper's variant: latentis' SGDAffineAligner (one linear layer, Adam, MSE)."""
    from latentis.transform.translate.aligner import SGDAffineAligner

    aligner = SGDAffineAligner(num_steps=steps, lr=lr, random_seed=seed)
    aligner.fit(inputs, targets)
    with torch.no_grad():
        mapped, _ = aligner.transform(new_inputs)
    return mapped.float()


def _row_chunks(problem: InitProblem, ids: torch.Tensor) -> Iterator[tuple[int, torch.Tensor]]:
    """(first index into ids, float32 source rows) for ``ids``, CHUNK_ROWS at a time."""
    for start in range(0, len(ids), CHUNK_ROWS):
        yield start, read_source_rows(problem, ids[start : start + CHUNK_ROWS])


def chunked_standard_scaler(problem: InitProblem, ids: torch.Tensor) -> StandardScaler:
    """Per-column mean and (unbiased) std of the source rows ``ids``, in two passes over row chunks: each chunk's
    column sums in float32, added up across chunks in float64. Summing each chunk in float64 instead took 2.4 times
    as long for the same statistics to 1e-7 relative (12.0 -> 4.9 s at DeepSeek-V3's 129,280 x 7,168 on 2 cores,
    most of it converting every element to float64)."""
    total = torch.zeros(problem.source_matrix.shape[1], dtype=torch.float64)
    for _, rows in _row_chunks(problem, ids):
        total += rows.sum(0)
    mean = total / max(len(ids), 1)
    mean32, squares = mean.float(), torch.zeros_like(total)
    for _, rows in _row_chunks(problem, ids):
        squares += rows.sub_(mean32).square_().sum(0)
    std = (squares / max(len(ids) - 1, 1)).sqrt()
    return StandardScaler(mean.float(), std.float().clamp_min(1e-8))


@register_initializer("sava", needs_helper=True, helpers=HELPERS, row_blocks=True)
def sava(
    problem: InitProblem, *, solver: str = "lstsq", normalise: str = "independent", steps: int = 1000, lr: float = 1e-3
) -> Iterator[torch.Tensor]:
    """(N, hidden): phi(h_i), phi the affine map helper -> source fitted on shared tokens in scaled spaces; yielded
    CHUNK_ROWS rows at a time.

    solver: "lstsq" (closed form, default: exact and deterministic) or "sgd" (latentis' SGDAffineAligner with
        Adam for ``steps`` steps at learning rate ``lr``, as in the paper's Appendix A).
    normalise: "independent" (default: latentis' MeanLPNorm, the authors' setting) or "paired"; see
        :func:`l2_norms`.
    A new token without a helper vector gets a random row from N(mu, sigma^2), mu and sigma per column of all the
    source rows.
    """
    if solver not in ("lstsq", "sgd") or normalise not in ("paired", "independent"):
        raise ValueError(f"sava needs solver 'lstsq'|'sgd' and normalise 'paired'|'independent', got {solver!r}, {normalise!r}")
    helper = require_helper(problem, "sava")
    overlap_targets, overlap_sources = overlap_pairs(problem)
    anchor_vectors, anchor_known = helper_rows(helper, overlap_targets)
    if int(anchor_known.sum()) < 2:
        raise ValueError("sava needs at least two shared tokens with helper vectors to fit its map; it found "
                         f"{int(anchor_known.sum())}: check that the helper uses the target tokenizer")
    anchor_sources = overlap_sources[anchor_known]
    hidden = problem.source_matrix.shape[1]
    helper_scaler = StandardScaler.fit(anchor_vectors[anchor_known])
    source_scaler = chunked_standard_scaler(problem, anchor_sources)
    helper_scaled = helper_scaler.forward(anchor_vectors[anchor_known])
    helper_norms = l2_norms(helper_scaled)
    inputs = helper_scaled / helper_norms

    def scaled_targets() -> Iterator[tuple[int, torch.Tensor, torch.Tensor]]:
        """(first, targets, their norms) of the shared rows, chunk by chunk: standardised, then L2-normalised."""
        for first, rows in _row_chunks(problem, anchor_sources):
            scaled = source_scaler.forward(rows)
            norms = helper_norms[first : first + len(rows)] if normalise == "paired" else l2_norms(scaled)
            yield first, scaled / norms, norms

    norm_total, weights, mapped_all = 0.0, None, None
    if solver == "lstsq":
        fit = ChunkedAffineLstsq(inputs, hidden)
        for first, targets, norms in scaled_targets():
            fit.add(first, targets)
            norm_total += float(norms.double().sum())
        weights = fit.solution()
        del fit
    else:  # latentis' aligner fits on the whole targets
        chunks = list(scaled_targets())
        targets = torch.cat([chunk for _, chunk, _ in chunks])
        norm_total = float(torch.cat([norms for _, _, norms in chunks]).double().sum())
        del chunks
        seed = int(torch.randint(2**31 - 1, (1,), generator=problem.generator))
        queries, _ = helper_rows(helper, problem.new_target_ids)
        query_scaled = helper_scaler.forward(queries)
        query_unit = query_scaled / l2_norms(query_scaled)
        mapped_all = _sgd_map(inputs, targets, query_unit, steps, lr, seed)
        del targets
    mean_source_norm = norm_total / len(anchor_sources)
    fallback = None
    for start in range(0, len(problem.new_target_ids), CHUNK_ROWS):
        queries, has_vector = helper_rows(helper, problem.new_target_ids[start : start + CHUNK_ROWS])
        query_scaled = helper_scaler.forward(queries)
        query_norms = l2_norms(query_scaled)
        if weights is not None:
            mapped = apply_affine(weights, query_scaled / query_norms)
        else:
            mapped = mapped_all[start : start + CHUNK_ROWS]
        mapped = mapped * (query_norms if normalise == "paired" else mean_source_norm)
        rows = source_scaler.inverse(mapped)
        missing = int((~has_vector).sum())
        if missing:
            if fallback is None:  # per column, over all source rows
                fallback = chunked_standard_scaler(problem, torch.arange(problem.source_matrix.shape[0]))
            draws = torch.randn(missing, hidden, generator=problem.generator, dtype=torch.float32)
            rows[~has_vector] = fallback.inverse(draws)
        yield rows
