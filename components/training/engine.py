"""The optimisation engine seam: the loop calls ``backward`` and ``step`` and never knows whether plain torch
(this file) or DeepSpeed (``vocadapt.platform.lapt.deepspeed_config``) is underneath.

Both follow DeepSpeed's semantics: ``backward(loss)`` once per micro-batch with the loss *not* divided by the
accumulation steps, ``step()`` once per micro-batch; the optimizer only steps on an accumulation boundary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from contextlib import AbstractContextManager, nullcontext
from typing import Callable, Protocol

import torch
from torch import nn


@dataclass(frozen=True)
class EngineSpec:
    learning_rate: float
    warmup_steps: int
    total_steps: int  # optimizer steps of this stage
    schedule: str  # cosine | constant
    min_lr_ratio: float
    weight_decay: float
    max_grad_norm: float | None
    grad_accumulation_steps: int


class TrainingEngine(Protocol):
    module: nn.Module  # call forward on this (DDP- or DeepSpeed-wrapped)

    def backward(self, loss: torch.Tensor) -> None: ...

    def micro_batch(self) -> AbstractContextManager: ...  # wraps one micro-batch's forward and backward

    def step(self) -> None: ...

    def learning_rate(self) -> float: ...

    def close(self) -> None: ...  # end of a stage: release hooks before the next stage builds its engine

    def save(self, directory: Path, rank: int) -> None: ...

    def load(self, directory: Path) -> None: ...


EngineFactory = Callable[[nn.Module, list[nn.Parameter], EngineSpec], TrainingEngine]


def lr_multiplier(spec: EngineSpec) -> Callable[[int], float]:
    """Linear warm-up to 1, then constant or cosine down to ``min_lr_ratio`` at the stage's last step."""

    def multiplier(step: int) -> float:
        if step < spec.warmup_steps:
            return (step + 1) / (spec.warmup_steps + 1)
        if spec.schedule == "constant":
            return 1.0
        decay_steps = max(1, spec.total_steps - spec.warmup_steps - 1)
        progress = min(1.0, (step - spec.warmup_steps) / decay_steps)
        return spec.min_lr_ratio + (1 - spec.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return multiplier


def build_optimizer(params: list[nn.Parameter], spec: EngineSpec) -> torch.optim.AdamW:
    # no weight decay on vectors (norms, biases): the usual LLM recipe
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": spec.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=spec.learning_rate, betas=(0.9, 0.95))


class TorchEngine:
    """AdamW + warm-up/cosine on plain torch; DistributedDataParallel when a process group with >1 rank exists."""

    def __init__(self, module: nn.Module, params: list[nn.Parameter], spec: EngineSpec) -> None:
        self.spec, self.params, self.model = spec, params, module
        distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
        if distributed and torch.distributed.get_world_size() > 1:
            self.module = nn.parallel.DistributedDataParallel(module)
        else:
            self.module = module
        self.optimizer = build_optimizer(params, spec)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_multiplier(spec))
        self.micro_steps = 0

    def micro_batch(self) -> AbstractContextManager:
        """Under DDP, every micro-batch but the last of an accumulation window runs in ``no_sync``: gradients
        accumulate locally and are all-reduced once, in the last backward (which reduces the accumulated sum)."""
        boundary = (self.micro_steps + 1) % self.spec.grad_accumulation_steps == 0
        if boundary or not isinstance(self.module, nn.parallel.DistributedDataParallel):
            return nullcontext()
        return self.module.no_sync()

    def backward(self, loss: torch.Tensor) -> None:
        (loss / self.spec.grad_accumulation_steps).backward()

    def step(self) -> None:
        self.micro_steps += 1
        if self.micro_steps % self.spec.grad_accumulation_steps:
            return
        if self.spec.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(self.params, self.spec.max_grad_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)

    def learning_rate(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def close(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def save(self, directory: Path, rank: int) -> None:
        """Rank 0 writes the weights (safetensors) and the optimizer/scheduler state; replicas are identical."""
        from safetensors.torch import save_model

        if rank != 0:
            return
        directory.mkdir(parents=True, exist_ok=True)
        save_model(self.model, str(directory / "model.safetensors"))
        torch.save({"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                    "micro_steps": self.micro_steps}, directory / "optimizer.pt")

    def load(self, directory: Path) -> None:
        from safetensors.torch import load_model

        load_model(self.model, str(directory / "model.safetensors"))
        state = torch.load(directory / "optimizer.pt", weights_only=True)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.micro_steps = state["micro_steps"]
