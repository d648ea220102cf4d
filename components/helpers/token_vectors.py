"""The helper vectors every helper kind produces: one vector for each target token id."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class TokenVectors:
    """Helper vectors indexed by target token id.

    vectors: (V_target, d) float32; row i is the helper's vector for target token i (zeros where unknown).
    known: (V_target,) bool; False for tokens the helper has no vector for.
    kind: "fasttext", "model" or "vectors".
    description: where the vectors came from, for the record.
    """

    vectors: torch.Tensor
    known: torch.Tensor
    kind: str
    description: str

    def record(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "description": self.description,
            "dimension": int(self.vectors.shape[1]),
            "tokens_with_vectors": int(self.known.sum()),
        }
