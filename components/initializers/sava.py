"""SAVA: an affine map from the helper's embedding space to the source's, fitted on the shared tokens and applied
to the new ones (SAVA §3.1 eq. 1 and Appendix A)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from vocadapt.components.initializers import InitProblem, register_initializer
from vocadapt.components.initializers._common import gaussian_rows, helper_rows, overlap_pairs, require_helper

HELPERS = ("model", "fasttext", "vectors")


@dataclass
class SpaceScaler:
    """Standard scaling then L2 normalisation (Appendix A); the inverse rescales by the mean norm, as latentis'
    L2 transform does, then undoes the standard scaling."""

    mean: torch.Tensor  # (d,)
    std: torch.Tensor  # (d,)
    mean_norm: torch.Tensor  # ()

    @classmethod
    def fit(cls, rows: torch.Tensor) -> "SpaceScaler":
        mean = rows.mean(0)
        std = rows.std(0).clamp_min(1e-8)
        return cls(mean, std, ((rows - mean) / std).norm(dim=1).mean())

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.normalize((rows - self.mean) / self.std, dim=1)

    def inverse(self, rows: torch.Tensor) -> torch.Tensor:
        return rows * self.mean_norm * self.std + self.mean


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
def sava(problem: InitProblem, *, solver: str = "lstsq", steps: int = 1000, lr: float = 1e-3) -> torch.Tensor:
    """(N, hidden): phi(h_i), phi the affine map helper -> source fitted on shared tokens in scaled spaces.

    solver: "lstsq" (closed form, default: exact and deterministic) or "sgd" (latentis' SGDAffineAligner with
        Adam for ``steps`` steps at learning rate ``lr``, as in the paper's Appendix A).
    A new token without a helper vector gets a random row from N(mu, sigma^2).
    """
    if solver not in ("lstsq", "sgd"):
        raise ValueError(f"sava solver must be 'lstsq' or 'sgd', got {solver!r}")
    helper = require_helper(problem, "sava", HELPERS)
    overlap_targets, overlap_sources = overlap_pairs(problem)
    anchor_vectors, anchor_known = helper_rows(helper, overlap_targets)
    if int(anchor_known.sum()) < 2:
        raise ValueError("sava needs at least two shared tokens with helper vectors to fit its map; it found "
                         f"{int(anchor_known.sum())}: check that the helper uses the target tokenizer")
    helper_scaler = SpaceScaler.fit(anchor_vectors[anchor_known])
    source_anchor_rows = problem.source_matrix[overlap_sources[anchor_known]].float()
    source_scaler = SpaceScaler.fit(source_anchor_rows)
    inputs, targets = helper_scaler.forward(anchor_vectors[anchor_known]), source_scaler.forward(source_anchor_rows)
    queries, has_vector = helper_rows(helper, problem.new_target_ids)
    new_inputs = helper_scaler.forward(queries)
    if solver == "lstsq":
        mapped = apply_affine(fit_affine_lstsq(inputs, targets), new_inputs)
    else:
        seed = int(torch.randint(2**31 - 1, (1,), generator=problem.generator))
        mapped = _sgd_map(inputs, targets, new_inputs, steps, lr, seed)
    rows = source_scaler.inverse(mapped)
    if not bool(has_vector.all()):
        rows[~has_vector] = gaussian_rows(problem.source_matrix, int((~has_vector).sum()), problem.generator)
    return rows
