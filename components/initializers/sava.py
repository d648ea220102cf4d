"""SAVA: an affine map from the helper's embedding space to the source's, fitted on the shared tokens and applied
to the new ones (SAVA §3.1 eq. 1 and Appendix A).

The default normalisation is the authors' (Appendix A, with latentis: ``StandardScaling`` then ``MeanLPNorm`` on both
sides), checked against rows made by latentis' ``Translator`` with the authors' ``SGDAffineAligner`` settings in
tests/initializers/test_authors_reference.py; the closed-form least squares stands in for the 1,000 Adam steps
(exact, deterministic, and at 8B shape far cheaper on a CPU) and gives the same rows to a centred cosine of 0.997 or
more on that case. ``normalise="paired"`` is the variant vocadapt shipped before; BENCHMARKS.md ("Initialiser
defaults vs the authors' code") compares the two.

Not ``columnwise``: checkpoint surgery holds its matrices whole. Column j of a row depends on other columns three ways:
the default normalisation divides each shared token's standardised source row by its L2 norm over the whole hidden
size and multiplies the mapped rows back by the mean of those norms; the "sgd" solver fits one linear layer whose
MSE loss and Adam steps see every column; and the closed-form ``lstsq`` is a blocked LAPACK solve whose rounding
for column j need not be the same when the right-hand side has other columns. The first could be computed once over
all columns before the blocks (a pass over the shared tokens' rows), but streamed surgery hands a method one block at
a time and has no such pass, and the third would still leave the streamed bytes unproven; so sava stays whole-matrix
(4.7 GB peak at 8B shape, BENCHMARKS.md "Initialisers at 8B scale").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from vocadapt.components.initializers import InitProblem, register_initializer
from vocadapt.components.initializers._common import gaussian_rows, helper_rows, overlap_pairs, require_helper

HELPERS = ("model", "fasttext", "vectors")


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


def l2_scales(helper_scaled: torch.Tensor, source_scaled: torch.Tensor | None, normalise: str):
    """The divisors of the L2 normalisation (Appendix A): (helper side (n, 1), source side (n, 1) or None).

    "paired" divides both sides of a pair by the helper row's norm, so an affine relation stays exactly linear and
    the inverse multiplies each new token by its own helper norm; "independent" divides each side by its own norm,
    as latentis' MeanLPNorm does (the authors' setting), and the inverse multiplies by the mean source norm. On a
    planted affine map (8 -> 16 dims, 300 shared tokens) "independent" recovers rows to cosine 0.988 at worst,
    "paired" to 1.0.
    """
    helper_norms = helper_scaled.norm(dim=1, keepdim=True).clamp_min(1e-12)
    if source_scaled is None:
        return helper_norms, None
    if normalise == "paired":
        return helper_norms, helper_norms
    return helper_norms, source_scaled.norm(dim=1, keepdim=True).clamp_min(1e-12)


def fit_affine_lstsq(inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Closed-form least squares for y = [x, 1] W: inputs (O, m), targets (O, n) -> W (m + 1, n), in float64."""
    design = torch.cat([inputs, torch.ones(inputs.shape[0], 1, dtype=inputs.dtype)], dim=1).double()
    return torch.linalg.lstsq(design, targets.double()).solution


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


@register_initializer("sava", needs_helper=True, helpers=HELPERS)
def sava(
    problem: InitProblem, *, solver: str = "lstsq", normalise: str = "independent", steps: int = 1000, lr: float = 1e-3
) -> torch.Tensor:
    """(N, hidden): phi(h_i), phi the affine map helper -> source fitted on shared tokens in scaled spaces.

    solver: "lstsq" (closed form, default: exact and deterministic) or "sgd" (latentis' SGDAffineAligner with
        Adam for ``steps`` steps at learning rate ``lr``, as in the paper's Appendix A).
    normalise: "independent" (default: latentis' MeanLPNorm, the authors' setting) or "paired"; see
        :func:`l2_scales`.
    A new token without a helper vector gets a random row from N(mu, sigma^2).
    """
    if solver not in ("lstsq", "sgd") or normalise not in ("paired", "independent"):
        raise ValueError(f"sava needs solver 'lstsq'|'sgd' and normalise 'paired'|'independent', got {solver!r}, {normalise!r}")
    helper = require_helper(problem, "sava")
    overlap_targets, overlap_sources = overlap_pairs(problem)
    anchor_vectors, anchor_known = helper_rows(helper, overlap_targets)
    if int(anchor_known.sum()) < 2:
        raise ValueError("sava needs at least two shared tokens with helper vectors to fit its map; it found "
                         f"{int(anchor_known.sum())}: check that the helper uses the target tokenizer")
    helper_scaler = StandardScaler.fit(anchor_vectors[anchor_known])
    source_scaler = StandardScaler.fit(problem.source_matrix[overlap_sources[anchor_known]].float())
    helper_scaled = helper_scaler.forward(anchor_vectors[anchor_known])
    source_scaled = source_scaler.forward(problem.source_matrix[overlap_sources[anchor_known]].float())
    helper_norms, source_norms = l2_scales(helper_scaled, source_scaled, normalise)
    inputs, targets = helper_scaled / helper_norms, source_scaled / source_norms
    queries, has_vector = helper_rows(helper, problem.new_target_ids)
    query_scaled = helper_scaler.forward(queries)
    query_norms, _ = l2_scales(query_scaled, None, normalise)
    if solver == "lstsq":
        mapped = apply_affine(fit_affine_lstsq(inputs, targets), query_scaled / query_norms)
    else:
        seed = int(torch.randint(2**31 - 1, (1,), generator=problem.generator))
        mapped = _sgd_map(inputs, targets, query_scaled / query_norms, steps, lr, seed)
    mapped = mapped * (query_norms if normalise == "paired" else source_norms.mean())
    rows = source_scaler.inverse(mapped)
    if not bool(has_vector.all()):
        rows[~has_vector] = gaussian_rows(problem.source_matrix, int((~has_vector).sum()), problem.generator)
    return rows
