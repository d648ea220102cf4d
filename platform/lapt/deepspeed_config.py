"""DeepSpeed for the LAPT loop: the JSON config generated from the typed settings, and the engine adapter.

The adapter follows ``components.training.engine.TrainingEngine`` so the loop does not know DeepSpeed is there.
On CPU it runs with gloo; ``"torch_adam": true`` keeps DeepSpeed from compiling its fused Adam (about 60 s), and
with optimizer offload ``zero_force_ds_cpu_optimizer: false`` lets that torch AdamW run on the offloaded state. The
first ``deepspeed.initialize`` on a machine compiles a small communication op (about 35 s, cached afterwards).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vocadapt.platform.config.lapt_sections import DeepSpeedSection

if TYPE_CHECKING:
    from vocadapt.components.training.engine import EngineSpec


def deepspeed_config(deepspeed: DeepSpeedSection | dict, spec: EngineSpec, *, micro_batch_size: int,
                     world_size: int, on_gpu: bool) -> dict[str, Any]:
    """The DeepSpeed config for one training stage (``spec``: its learning rate, weight decay, gradient clipping
    and accumulation; the schedule is applied by :class:`DeepSpeedEngine`)."""
    grad_accumulation_steps, max_grad_norm = spec.grad_accumulation_steps, spec.max_grad_norm
    learning_rate, weight_decay = spec.learning_rate, spec.weight_decay
    section = deepspeed if isinstance(deepspeed, DeepSpeedSection) else DeepSpeedSection.model_validate(deepspeed)
    bf16 = section.precision == "bf16" or (section.precision == "auto" and on_gpu)
    zero: dict[str, Any] = {"stage": section.zero_stage, "contiguous_gradients": True, "overlap_comm": on_gpu}
    if section.offload_optimizer:
        if section.zero_stage == 0:
            raise ValueError("optimizer offload needs ZeRO stage 1, 2 or 3; set lapt.deepspeed.zero_stage")
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": on_gpu}
    return {
        "train_micro_batch_size_per_gpu": micro_batch_size,
        "gradient_accumulation_steps": grad_accumulation_steps,
        "train_batch_size": micro_batch_size * grad_accumulation_steps * world_size,
        "gradient_clipping": float(max_grad_norm or 0.0),
        "zero_optimization": zero,
        "bf16": {"enabled": bf16},
        "optimizer": {
            "type": "AdamW",
            # torch's AdamW: no fused-Adam compilation, and it runs anywhere (CPU, GPU, offloaded state)
            "params": {"lr": learning_rate, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": weight_decay,
                       "torch_adam": True, "adam_w_mode": True},
        },
        "zero_force_ds_cpu_optimizer": False,
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }


class DeepSpeedEngine:
    """``TrainingEngine`` on a DeepSpeed engine; backward/step follow DeepSpeed's accumulation semantics."""

    def __init__(self, module, params, spec, config: dict[str, Any]) -> None:
        import deepspeed
        import torch

        from vocadapt.components.training.engine import lr_multiplier

        decay = [p for p in params if p.ndim >= 2]
        no_decay = [p for p in params if p.ndim < 2]
        groups = [g for g in ({"params": decay}, {"params": no_decay, "weight_decay": 0.0}) if g["params"]]
        self.engine, self.optimizer, _, self.scheduler = deepspeed.initialize(
            model=module, model_parameters=groups, config=config,
            lr_scheduler=lambda optimizer: torch.optim.lr_scheduler.LambdaLR(optimizer, lr_multiplier(spec)),
        )
        self.module = self.engine
        self.forward_needs_all_ranks = config["zero_optimization"]["stage"] == 3
        self.closed = False

    def micro_batch(self):
        """DeepSpeed decides itself when to reduce gradients (on the accumulation boundary, or per bucket under
        ZeRO-2/3, which partition them); its ``no_sync`` refuses ZeRO-2/3, so nothing to do here."""
        from contextlib import nullcontext

        return nullcontext()

    def backward(self, loss) -> None:
        self.engine.backward(loss)

    def step(self) -> None:
        self.engine.step()

    def learning_rate(self) -> float:
        return float(self.engine.get_lr()[0])

    def optimizer_parameter_count(self) -> int:
        """Elements of the parameters this engine's optimizer updates (its ZeRO groups, or its param groups)."""
        groups = getattr(self.optimizer, "bit16_groups", None) or getattr(self.optimizer, "fp16_groups", None)
        if groups is None:
            groups = [group["params"] for group in self.optimizer.param_groups]
        return sum(p.numel() for group in groups for p in group)

    def close(self) -> None:
        """Remove this engine's gradient hooks (ZeRO-1/2 reduce through hooks on every trainable parameter). The
        next stage of a two-stage run builds a new engine on the same module; a live old one would still catch
        the embeddings' gradients and move them into its own buffers."""
        if not self.closed:
            self.engine.destroy()
            self.closed = True

    def save(self, directory: Path, rank: int) -> None:
        """Every rank writes its shard of the optimizer state (and rank 0 the module) under ``deepspeed/``."""
        self.engine.save_checkpoint(str(directory), tag="deepspeed")

    def load(self, directory: Path) -> None:
        path, _ = self.engine.load_checkpoint(str(directory), tag="deepspeed")
        if path is None:
            raise FileNotFoundError(f"{directory} holds no DeepSpeed checkpoint; resume with the same engine settings")


def deepspeed_engine_factory(deepspeed: DeepSpeedSection | dict, settings):
    """An ``EngineFactory`` for ``train_lapt``; needs a process group (Ray Train's, or init_single_process)."""
    import torch

    def factory(module, params, spec):
        config = deepspeed_config(deepspeed, spec, micro_batch_size=settings.batch_size,
                                  world_size=torch.distributed.get_world_size(), on_gpu=torch.cuda.is_available())
        return DeepSpeedEngine(module, params, spec, config)

    return factory


def init_single_process(backend: str | None = None) -> None:
    """A one-rank process group so DeepSpeed runs without a launcher (benchmarks, debugging)."""
    import torch

    if torch.distributed.is_initialized():
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    os.environ.update({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(port)})
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    torch.distributed.init_process_group(backend=backend, rank=0, world_size=1)
