"""Random token: each new row is a copy of a randomly chosen existing source row ("Design choices" Table 5)."""

from __future__ import annotations

import torch

from vocadapt.components.initializers import InitProblem, register_initializer
from vocadapt.components.initializers._common import overlap_pairs


@register_initializer("random_token", columnwise=True)
def random_token(problem: InitProblem, *, from_overlap_only: bool = False) -> torch.Tensor:
    """(N, hidden): row i is the source row of a token drawn uniformly at random.

    from_overlap_only: draw only among tokens both vocabularies share (otherwise among every source row).
    """
    # Padding rows past the source tokenizer's length are not tokens (checkpoints pad the matrix to a
    # multiple of 8, 64 or 128): never draw them.
    token_rows = min(problem.source_matrix.shape[0], len(problem.source_tokenizer))
    candidates = torch.arange(token_rows)
    if from_overlap_only:
        _, candidates = overlap_pairs(problem)
        if len(candidates) == 0:
            raise ValueError("random_token with from_overlap_only=True needs overlapping tokens; there are none")
    picks = torch.randint(len(candidates), (len(problem.new_target_ids),), generator=problem.generator)
    return problem.source_matrix[candidates[picks]].float().clone()
