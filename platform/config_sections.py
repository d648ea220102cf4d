"""Config sections owned by the training side, and the shared base class. Imports nothing heavy."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class ConfigError(ValueError):
    """A config that cannot be used; the message names the field and the fix."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class LaptSection(Section):
    enabled: bool = Field(True, description="Run continued pre-training after initialisation.")
    max_steps: int = Field(20, ge=0, description="Optimizer steps.")
    batch_size: int = Field(4, ge=1, description="Packed sequences per step per worker.")
    sequence_length: int = Field(128, ge=8, description="Tokens per packed sequence.")
    learning_rate: float = Field(2e-4, gt=0, description="Peak learning rate.")
    warmup_steps: int = Field(2, ge=0, description="Linear warm-up steps.")
    schedule: Literal["cosine", "constant"] = Field("cosine", description="Learning-rate schedule after warm-up.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    mixing: dict[str, float] = Field(
        default_factory=lambda: {"target": 0.75, "source": 0.25},
        description="Share of each language stream in the batches: 'target' and 'source'.",
    )
    num_workers: int = Field(1, ge=1, description="Ray Train workers (CPU here, GPU on a cluster).")
    use_gpu: bool = Field(False, description="Ray Train workers take a GPU each.")
    log_every: int = Field(1, ge=1, description="Log loss and throughput every N steps.")

    @field_validator("mixing")
    @classmethod
    def _mixing(cls, mixing: dict[str, float]) -> dict[str, float]:
        unknown = set(mixing) - {"target", "source"}
        if unknown:
            raise ValueError(f"unknown streams {sorted(unknown)}; use 'target' and 'source'")
        if any(v < 0 for v in mixing.values()) or abs(sum(mixing.values()) - 1.0) > 1e-6:
            raise ValueError(f"shares must be non-negative and sum to 1, got {mixing}")
        return mixing


