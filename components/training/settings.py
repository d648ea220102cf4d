"""The typed settings of one LAPT run, as the training loop reads them.

The platform's ``LaptSection`` (``platform/config_sections.py``) carries the same field names plus the edge-only
ones (workers, DeepSpeed, storage); :meth:`LaptSettings.from_any` takes either and keeps the fields the loop needs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

STRATEGIES = ("full", "lora", "two-stage", "2x2-ls")
OBJECTIVES = ("clm", "mtp")


@dataclass
class LaptSettings:
    strategy: str = "full"  # full | lora | two-stage | 2x2-ls ("0.01GB" §5, "Design choices" §3.2)
    objective: str = "clm"  # clm | mtp (one extra head initialised from the LM head)
    max_steps: int | None = 20  # optimizer steps; with max_tokens, whichever ends first
    max_tokens: int | None = None  # real tokens over all workers
    batch_size: int = 4  # packed sequences per micro-batch per worker
    grad_accumulation_steps: int = 1
    sequence_length: int = 128
    learning_rate: float = 2e-4
    warmup_steps: int = 2
    schedule: str = "cosine"  # cosine | constant, after linear warm-up
    min_lr_ratio: float = 0.1  # cosine ends at learning_rate x this
    weight_decay: float = 0.0
    max_grad_norm: float | None = 1.0
    mixing: dict[str, float] = field(default_factory=lambda: {"target": 0.75, "source": 0.25})
    stage_one_steps: int | None = None  # two-stage: embeddings-and-head steps (None: a tenth of the run, >= 1)
    stage_one_learning_rate: float = 1e-3  # two-stage: "Design choices" §3.2 warms embeddings up at 1e-3
    second_stage: str = "full"  # two-stage: full | lora
    lora_rank: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.0
    log_every: int = 1
    eval_every: int = 0  # 0: evaluate only at the end
    eval_max_length: int = 256
    eval_batch_size: int = 8
    checkpoint_every: int = 0  # 0: no checkpoints
    seed: int = 0
    peak_flops: float | None = None  # per device; None: detected (H100 dense bf16 989e12), unknown on CPU
    compile: bool | str = False  # torch.compile each decoder layer: True (inductor) or a backend name

    @property
    def compile_backend(self) -> str | None:
        """The torch.compile backend for the decoder layers, or None (eager)."""
        if self.compile is True:
            return "inductor"
        return self.compile or None

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown LAPT strategy {self.strategy!r}; choose one of {', '.join(STRATEGIES)}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"unknown LAPT objective {self.objective!r}; choose one of {', '.join(OBJECTIVES)}")
        if self.second_stage not in ("full", "lora"):
            raise ValueError(f"second_stage must be 'full' or 'lora', got {self.second_stage!r}")
        if self.schedule not in ("cosine", "constant"):
            raise ValueError(f"schedule must be 'cosine' or 'constant', got {self.schedule!r}")
        if not isinstance(self.compile, (bool, str)):
            raise ValueError(f"compile must be true, false or a torch.compile backend name, got {self.compile!r}")
        if not self.max_steps and not self.max_tokens:
            raise ValueError("LAPT needs a budget: set max_steps or max_tokens to a positive number")

    @property
    def tokens_per_micro_batch(self) -> int:
        return self.batch_size * self.sequence_length

    def total_steps(self, world_size: int = 1) -> int:
        """Optimizer steps: max_steps, or the steps max_tokens buys over all workers, whichever is fewer."""
        budgets = []
        if self.max_steps:
            budgets.append(self.max_steps)
        if self.max_tokens:
            per_step = self.tokens_per_micro_batch * self.grad_accumulation_steps * world_size
            budgets.append(max(1, -(-self.max_tokens // per_step)))
        return min(budgets)

    @classmethod
    def from_any(cls, settings: Any, **overrides: Any) -> LaptSettings:
        """Settings from a LaptSettings, a pydantic section (``config.lapt``) or a mapping; unknown keys ignored."""
        if isinstance(settings, cls) and not overrides:
            return settings
        if isinstance(settings, cls):
            values = dataclasses.asdict(settings)
        elif hasattr(settings, "model_dump"):
            values = settings.model_dump()
        else:
            values = dict(settings or {})
        values.update(overrides)
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})
