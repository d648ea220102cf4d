"""Config sections owned by the training side, and the shared base class. Imports nothing heavy."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from vocadapt.components.errors import UserError
from vocadapt.components.training.documents import DatasetSource
from vocadapt.components.training.settings import LaptSettings, is_stream
from vocadapt.components.typed_settings import StrictSettings


class ConfigError(UserError, ValueError):
    """A config that cannot be used; the message names the field and the fix."""


class Section(StrictSettings):
    """A config section: unknown keys are refused with the nearest valid name."""


class DeepSpeedSection(Section):
    enabled: bool = Field(False, description="Run the LAPT loop under DeepSpeed (gloo on CPU, NCCL on GPU).")
    zero_stage: Literal[0, 1, 2, 3] = Field(
        2, description="ZeRO stage: 1 shards optimizer state, 2 also gradients, 3 also parameters."
    )
    offload_optimizer: bool = Field(False, description="Keep optimizer state in CPU memory (ZeRO 1-3).")
    precision: Literal["auto", "bf16", "fp32"] = Field(
        "auto", description="Training precision: 'auto' is bf16 on GPU and fp32 on CPU."
    )


class LaptSection(LaptSettings, Section):
    """The ``lapt`` section: the loop's settings (:class:`LaptSettings`, every field the loop reads) plus the edges'
    fields (where the text comes from, Ray workers, checkpoints storage, DeepSpeed). Validated once, here; the same
    object goes to the Ray workers and the loop."""

    enabled: bool = Field(True, description="Run continued pre-training after initialisation.")
    train_files: dict[str, list[str]] | None = Field(
        None, description="LAPT text per stream, {target: [...], source: [...]} (.txt, .jsonl, .parquet); "
        "default: the corpus section's training files."
    )
    datasets: dict[str, DatasetSource] | None = Field(
        None, description="Hugging Face datasets per stream, {target: {dataset, config, split, text_field, "
        "streaming}}; a stream given here does not also take files."
    )
    runner: Literal["ray", "in_process"] = Field(
        "ray", description="Where the loop runs: 'ray' (Ray Train workers: several workers or nodes, GPUs, "
        "checkpoints a restarted worker group resumes from) or 'in_process' (the pipeline's own process, one worker "
        "on its CPU or first GPU, without Ray and without checkpoints: a short run on a laptop)."
    )
    num_workers: int = Field(1, ge=1, description="Ray Train workers (CPU here, GPU on a cluster).")
    use_gpu: bool = Field(False, description="Ray Train workers take a GPU each.")
    cpus_per_worker: int = Field(
        1, ge=1, description="CPUs each Ray Train worker reserves (and torch threads it uses when it has no GPU)."
    )
    storage_path: str | None = Field(
        None, description="Where Ray Train keeps checkpoints (a shared path or URI on a cluster); default: "
        "<output_dir>/<name>/ray. A rerun with the same run name resumes from the latest checkpoint there."
    )
    max_failures: int = Field(2, ge=-1, description="Worker failures Ray Train recovers from (-1: unlimited).")
    teacher: str | None = Field(
        None, description="Under a 'distill' objective, the model to distil from: a local folder with its "
        "tokenizer (safetensors weights; no remote code). Default: the source model (source.model), the "
        "self-distillation of tokenizer transfer."
    )
    deepspeed: DeepSpeedSection = Field(default_factory=DeepSpeedSection)

    @model_validator(mode="after")
    def _budget(self) -> LaptSection:
        """A config may give no budget (max_steps 0, no max_tokens): LAPT is then skipped (see ``runs``)."""
        return self

    @property
    def runs(self) -> bool:
        """LAPT runs: enabled and given a budget."""
        return self.enabled and self.has_budget

    @field_validator("train_files", "datasets")
    @classmethod
    def _streams(cls, streams: dict | None) -> dict | None:
        unknown = [name for name in streams or {} if not is_stream(name)]
        if unknown:
            raise ValueError(f"unknown streams {sorted(unknown)}; use 'target' and 'source' (and 'target_<code>' for "
                             "each further language of target.languages)")
        return streams

    @model_validator(mode="after")
    def _consistent(self) -> LaptSection:
        both = sorted(k for k in (self.datasets or {}) if (self.train_files or {}).get(k))
        if both:
            raise ValueError(f"streams {both} have both train_files and a dataset; give each stream one source")
        if self.strategy == "two-stage" and self.deepspeed.enabled and self.deepspeed.zero_stage == 3:
            raise ValueError("two-stage rebuilds the optimizer between stages, which ZeRO-3 does not support; "
                             "use deepspeed.zero_stage 1 or 2, or another strategy")
        if self.strategy == "new-rows" and self.deepspeed.enabled and self.deepspeed.zero_stage == 3:
            raise ValueError("strategy new-rows writes the trained rows back into the embedding and head matrices, "
                             "which ZeRO-3 partitions across ranks; use deepspeed.zero_stage 1 or 2 (the optimizer "
                             "state is only the new rows anyway)")
        if self.runner == "in_process":
            self._check_in_process()
        uses_lora = self.strategy == "lora" or (self.strategy == "two-stage" and self.second_stage == "lora")
        if uses_lora and self.deepspeed.enabled and self.deepspeed.zero_stage == 3:
            raise ValueError("merging LoRA into partitioned ZeRO-3 weights is not supported; use "
                             "deepspeed.zero_stage 1 or 2 with LoRA (its optimizer state is small anyway)")
        return self

    def _check_in_process(self) -> None:
        """What only Ray Train gives is refused with runner 'in_process', each with its fix."""
        ray_only = {
            "num_workers": (self.num_workers > 1, f"lapt.num_workers is {self.num_workers}"),
            "deepspeed": (self.deepspeed.enabled, "lapt.deepspeed.enabled is true"),
            "storage_path": (self.storage_path is not None, "lapt.storage_path is set (where Ray keeps checkpoints)"),
        }
        asked = [reason for needed, reason in ray_only.values() if needed]
        if asked:
            raise ValueError(f"lapt.runner 'in_process' trains one worker in this process, without checkpoints, but "
                             f"{'; '.join(asked)}: use lapt.runner 'ray', or drop those settings")
