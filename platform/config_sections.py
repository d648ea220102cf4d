"""Config sections owned by the training side, and the shared base class. Imports nothing heavy."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from vocadapt.components.errors import UserError


class ConfigError(UserError, ValueError):
    """A config that cannot be used; the message names the field and the fix."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class DeepSpeedSection(Section):
    enabled: bool = Field(False, description="Run the LAPT loop under DeepSpeed (gloo on CPU, NCCL on GPU).")
    zero_stage: Literal[0, 1, 2, 3] = Field(
        2, description="ZeRO stage: 1 shards optimizer state, 2 also gradients, 3 also parameters."
    )
    offload_optimizer: bool = Field(False, description="Keep optimizer state in CPU memory (ZeRO 1-3).")
    precision: Literal["auto", "bf16", "fp32"] = Field(
        "auto", description="Training precision: 'auto' is bf16 on GPU and fp32 on CPU."
    )


class LaptDatasetSection(Section):
    """One LAPT stream from a Hugging Face dataset, e.g. ``{dataset: uonlp/CulturaX, config: it, streaming: true}``."""

    dataset: str = Field(
        ..., description="Hugging Face dataset id (e.g. 'uonlp/CulturaX'), a builder reading local data_files "
        "('json', 'parquet', 'text'), or a folder written by datasets' save_to_disk."
    )
    config: str | None = Field(None, description="Dataset configuration (CulturaX: the language code, e.g. 'it').")
    split: str = Field("train", description="Split to read.")
    text_field: str = Field("text", description="Field holding each document's text.")
    streaming: bool = Field(
        False, description="Stream instead of downloading it all: read in the dataset's order, split per worker, "
        "resumed from the dataset's own state after a restart."
    )
    data_files: list[str] | None = Field(None, description="Local files for a 'json', 'parquet' or 'text' builder.")


class LaptSection(Section):
    enabled: bool = Field(True, description="Run continued pre-training after initialisation.")
    strategy: Literal["full", "lora", "two-stage", "2x2-ls"] = Field(
        "full",
        description="Which parameters train: 'full' all; 'lora' LoRA on every linear layer plus embeddings and "
        "head; 'two-stage' embeddings and head first, then `second_stage`; '2x2-ls' the bottom two and top two "
        "layers plus embeddings and head ('0.01GB' §5).",
    )
    objective: Literal["clm", "mtp"] = Field(
        "clm", description="'clm' next-token loss; 'mtp' adds one extra head, initialised from the LM head, that "
        "predicts the token after next ('0.01GB' §5)."
    )
    max_steps: int = Field(20, ge=0, description="Optimizer steps; with max_tokens, whichever ends first (0 and no max_tokens: no LAPT).")
    max_tokens: int | None = Field(
        None, ge=1, description="Token budget over all workers (real tokens); with max_steps, whichever ends first."
    )
    batch_size: int = Field(4, ge=1, description="Packed sequences per step per worker.")
    grad_accumulation_steps: int = Field(1, ge=1, description="Micro-batches per optimizer step.")
    sequence_length: int = Field(128, ge=8, description="Tokens per packed sequence.")
    learning_rate: float = Field(2e-4, gt=0, description="Peak learning rate.")
    warmup_steps: int = Field(2, ge=0, description="Linear warm-up steps.")
    schedule: Literal["cosine", "constant"] = Field("cosine", description="Learning-rate schedule after warm-up.")
    min_lr_ratio: float = Field(0.1, ge=0, le=1, description="Cosine ends at learning_rate times this.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay (matrices only).")
    max_grad_norm: float | None = Field(1.0, description="Clip the gradient norm to this (None: no clipping).")
    mixing: dict[str, float] = Field(
        default_factory=lambda: {"target": 0.75, "source": 0.25},
        description="Share of each language stream in the batches: 'target' and 'source'.",
    )
    train_files: dict[str, list[str]] | None = Field(
        None, description="LAPT text per stream, {target: [...], source: [...]} (.txt, .jsonl, .parquet); "
        "default: the corpus section's training files."
    )
    datasets: dict[str, LaptDatasetSection] | None = Field(
        None, description="Hugging Face datasets per stream, {target: {dataset, config, split, text_field, "
        "streaming}}; a stream given here does not also take files."
    )
    stage_one_steps: int | None = Field(
        None, ge=1, description="two-stage: steps that train only embeddings and head (default: a tenth)."
    )
    stage_one_learning_rate: float = Field(
        1e-3, gt=0, description="two-stage: learning rate of the embeddings-only stage ('Design choices' §3.2)."
    )
    second_stage: Literal["full", "lora"] = Field("full", description="two-stage: what trains after stage one.")
    lora_rank: int = Field(8, ge=1, description="LoRA rank (lora strategies).")
    lora_alpha: int = Field(16, ge=1, description="LoRA alpha (scale alpha / rank).")
    lora_dropout: float = Field(0.0, ge=0, lt=1, description="LoRA dropout.")
    num_workers: int = Field(1, ge=1, description="Ray Train workers (CPU here, GPU on a cluster).")
    use_gpu: bool = Field(False, description="Ray Train workers take a GPU each.")
    cpus_per_worker: int = Field(
        1, ge=1, description="CPUs each Ray Train worker reserves (and torch threads it uses when it has no GPU)."
    )
    log_every: int = Field(1, ge=1, description="Log loss and throughput every N steps.")
    eval_every: int = Field(0, ge=0, description="Held-out bits per byte every N steps (0: only at the end).")
    eval_max_length: int = Field(256, ge=16, description="Longest window, in tokens, scored at once in evaluation.")
    eval_batch_size: int = Field(8, ge=1, description="Windows per forward pass in evaluation.")
    checkpoint_every: int = Field(
        0, ge=0, description="Checkpoint (weights, optimizer, scheduler, data position, RNG) every N steps; "
        "0: only the final model. A killed worker resumes from the last one."
    )
    storage_path: str | None = Field(
        None, description="Where Ray Train keeps checkpoints (a shared path or URI on a cluster); default: "
        "<output_dir>/<name>/ray. A rerun with the same run name resumes from the latest checkpoint there."
    )
    max_failures: int = Field(2, ge=-1, description="Worker failures Ray Train recovers from (-1: unlimited).")
    peak_flops: float | None = Field(
        None, gt=0, description="Dense bf16 peak FLOP/s of one device for MFU; default: detected (H100 989e12)."
    )
    compile: bool | str = Field(
        False, description="torch.compile each decoder layer (true: inductor, or a backend name). On one H100, "
        "Llama-3.2-1B-shaped LAPT under ZeRO-2 bf16 ran 1.25x (one micro-batch per step) and 1.27x (six) faster "
        "(BENCHMARKS.md); compiling costs up to a minute at the start, more on CPU."
    )
    deepspeed: DeepSpeedSection = Field(default_factory=DeepSpeedSection)

    @field_validator("compile", mode="before")
    @classmethod
    def _compile(cls, value: Any) -> Any:
        """'true' / 'false' as text (an MLflow parameter, an environment variable) are the switches, not backends."""
        words = {"true": True, "on": True, "yes": True, "false": False, "off": False, "no": False, "": False}
        return words.get(value.strip().lower(), value) if isinstance(value, str) else value

    @field_validator("mixing")
    @classmethod
    def _mixing(cls, mixing: dict[str, float]) -> dict[str, float]:
        unknown = set(mixing) - {"target", "source"}
        if unknown:
            raise ValueError(f"unknown streams {sorted(unknown)}; use 'target' and 'source'")
        if any(v < 0 for v in mixing.values()) or abs(sum(mixing.values()) - 1.0) > 1e-6:
            raise ValueError(f"shares must be non-negative and sum to 1, got {mixing}")
        return mixing

    @field_validator("train_files", "datasets")
    @classmethod
    def _streams(cls, streams: dict | None) -> dict | None:
        unknown = set(streams or {}) - {"target", "source"}
        if unknown:
            raise ValueError(f"unknown streams {sorted(unknown)}; use 'target' and 'source'")
        return streams

    @model_validator(mode="after")
    def _consistent(self) -> LaptSection:
        both = sorted(k for k in (self.datasets or {}) if (self.train_files or {}).get(k))
        if both:
            raise ValueError(f"streams {both} have both train_files and a dataset; give each stream one source")
        if self.strategy == "two-stage" and self.deepspeed.enabled and self.deepspeed.zero_stage == 3:
            raise ValueError("two-stage rebuilds the optimizer between stages, which ZeRO-3 does not support; "
                             "use deepspeed.zero_stage 1 or 2, or another strategy")
        uses_lora = self.strategy == "lora" or (self.strategy == "two-stage" and self.second_stage == "lora")
        if uses_lora and self.deepspeed.enabled and self.deepspeed.zero_stage == 3:
            raise ValueError("merging LoRA into partitioned ZeRO-3 weights is not supported; use "
                             "deepspeed.zero_stage 1 or 2 with LoRA (its optimizer state is small anyway)")
        return self
