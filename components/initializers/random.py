"""Random: new rows drawn from N(mu, sigma^2) of the source embeddings (SAVA §3.1; "0.01GB" §4.1).

Registered ``columnwise``: the rows come from ``columnwise_gaussian_rows``, whose draws, mean and std for column j
depend on column j only, so checkpoint surgery streams the matrix a column block at a time and writes the same bytes
as the whole-matrix path. That draw replaced the row-major one (``gaussian_rows``): with the same seed the rows are
other values from the same distribution than runs before it produced. A streamed block draws its chunks' normals at
the full hidden size and keeps its own columns, so the draws cost (hidden / block width) times those of one pass.
"""

from __future__ import annotations

import torch

from vocadapt.components.initializers import InitProblem, register_initializer
from vocadapt.components.initializers._common import columnwise_gaussian_rows


@register_initializer("random", columnwise=True)
def random_normal(problem: InitProblem) -> torch.Tensor:
    """(N, hidden) rows, each dimension drawn from the normal with that dimension's source mean and std.

    SAVA writes g_random = N(mu(E_s), sigma^2(E_s)); we take mu and sigma per dimension, which keeps the anisotropy
    of the source space (a single scalar sigma would give rows far from where real tokens live).
    """
    return columnwise_gaussian_rows(problem, len(problem.new_target_ids))
