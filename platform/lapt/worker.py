"""What runs inside each Ray Train worker of a LAPT run (``platform/lapt/ray_train.py`` is the driver that starts them).

A worker loads the model and tokenizer from disk, reads its shard of the mixed text, and runs ``train_lapt`` under
the process group Ray set up; every rank writes its own files into each checkpoint (``ray.train.report``); rank 0
logs metrics into the pipeline's MLflow run (:class:`MlflowRunLogger`) and reports the final model
(safetensors), its metric history and the energy the run took, summed over nodes (:class:`_NodeEnergy`).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vocadapt.components.tokenizers.saving import save_tokenizer
from vocadapt.platform import model_loading
from vocadapt.platform.config.lapt_sections import LaptSection
from vocadapt.platform.lapt.progress import PROGRESS_ENV, worker_phase_progress, worker_progress

METRIC_PREFIX = "lapt_"  # LAPT's metrics in the MLflow run (the dashboard reads them by it)


class MlflowRunLogger:
    """The ``MetricLogger`` protocol writing into one existing MLflow run with ``MlflowClient.log_batch``.

    Used inside Ray workers, where no active run exists (and must not: an ``MLFLOW_RUN_ID`` leaked from ``mlflow
    run`` is cleared by the worker). Steps at or below the last step the run already holds for ``<prefix>loss``
    are skipped: after a resume they were logged before the failure, and logging them again would count them
    twice."""

    def __init__(self, tracking_uri: str, run_id: str, prefix: str = METRIC_PREFIX) -> None:
        from mlflow.tracking import MlflowClient

        self.client, self.run_id, self.prefix = MlflowClient(tracking_uri), run_id, prefix
        history = self.client.get_metric_history(run_id, f"{prefix}loss")
        self.logged_up_to = max((metric.step for metric in history), default=0)

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        from mlflow.entities import Metric

        if step is not None and step <= self.logged_up_to:
            return
        timestamp = int(time.time() * 1000)
        batch = [Metric(f"{self.prefix}{key}", float(value), timestamp, step or 0) for key, value in metrics.items()]
        self.client.log_batch(self.run_id, metrics=batch)


def lapt_worker(config: dict) -> None:
    """One Ray Train worker: load, train (resuming from Ray's latest checkpoint), report the final model."""
    os.environ.pop("MLFLOW_RUN_ID", None)  # `mlflow run` sets it in the driver; the worker must not inherit a run
    import ray.train
    import ray.train.torch
    import torch
    from vocadapt.components import training

    settings: LaptSection = config["settings"]  # validated once, in the driver; the loop reads it as it is
    rank = ray.train.get_context().get_world_rank()
    if rank == 0 and os.environ.get(PROGRESS_ENV):  # rank 0 may run on a node where the driver's folder is not
        Path(os.environ[PROGRESS_ENV]).parent.mkdir(parents=True, exist_ok=True)
    energy = _NodeEnergy(config)
    if not settings.use_gpu:
        torch.set_num_threads(settings.cpus_per_worker)  # as many threads as reserved CPUs
    inputs = load_inputs(config, settings, ray.train.torch.get_device(), logs=rank == 0)
    tokenizer = inputs.tokenizer
    checkpoint = ray.train.get_checkpoint()
    with checkpoint.as_directory() if checkpoint else nullcontext() as resume_dir:
        if resume_dir and (Path(resume_dir) / "final.json").is_file():
            energy.meter.stop()  # the finished run's final.json keeps the energy that run took
            return _report_again(Path(resume_dir), rank)  # a finished run rerun under its name
        energy.resume(resume_dir)
        hooks = training.LaptHooks(
            logger=inputs.logger, on_checkpoint=energy.checkpoint_hook(_report_checkpoint),
            on_step=worker_progress(rank, settings.total_steps(ray.train.get_context().get_world_size())),
            on_phase=worker_phase_progress(rank),
        )
        runtime = training.LaptRuntime(eval_documents=config["eval_documents"], distillation=inputs.distillation,
                                       engine_factory=_engine_factory(settings), resume_state=resume_dir)
        result = training.train_lapt(inputs.model, tokenizer, inputs.data, settings, hooks=hooks, runtime=runtime)
    _report_final(result, tokenizer, rank, energy.total(stop=True))


@dataclass
class WorkerInputs:
    """What a LAPT worker trains with (:func:`load_inputs`)."""

    tokenizer: Any
    model: Any
    distillation: Any  # the teacher of a 'distill' objective, or None
    data: Any  # components.training.LaptData
    logger: Any  # rank 0's MlflowRunLogger, else a NullLogger


def load_inputs(config: dict, settings: LaptSection, device: Any, logs: bool) -> WorkerInputs:
    """The tokenizer, the float32 model on ``device``, the teacher, the training text and (``logs``: rank 0, or the
    in-process runner) the MLflow logger of ``config``'s run: what a Ray worker and the in-process runner load alike."""
    import torch
    from vocadapt.components import training
    from vocadapt.components.metric_logging import NullLogger

    tokenizer = model_loading.load_checkpoint_tokenizer(config["tokenizer_dir"])
    model = model_loading.load_causal_lm(config["model_dir"], what="--model", dtype=torch.float32).to(device)
    distillation = load_teacher(config, settings, tokenizer)
    data = training.LaptData.from_sources(config["train_files"], settings.datasets)
    logger = NullLogger()
    if logs and config["tracking_uri"] and config["mlflow_run_id"]:
        logger = MlflowRunLogger(config["tracking_uri"], config["mlflow_run_id"])
    return WorkerInputs(tokenizer, model, distillation, data, logger)


def load_teacher(config: dict, settings: LaptSection, student_tokenizer):
    """The frozen teacher of a 'distill' objective (bf16 on a GPU), or None."""
    if not settings.distills:
        return None
    import torch
    from vocadapt.components.training.alm import AlmSettings
    from vocadapt.components.training.objectives import Distillation

    folder = config["teacher_dir"]
    dtype = torch.bfloat16 if settings.use_gpu else torch.float32
    teacher = model_loading.load_causal_lm(folder, what="lapt.teacher", dtype=dtype)
    teacher_tokenizer = model_loading.load_checkpoint_tokenizer(folder)
    alm = AlmSettings(temperature=settings.distill_temperature, threshold=settings.distill_threshold)
    return Distillation(teacher, teacher_tokenizer, student_tokenizer, max_teacher_length=settings.teacher_max_length,
                        alm=alm)


ENERGY_FILE = "energy.json"


class _NodeEnergy:
    """This worker's part of LAPT's energy meter: one meter per node, on local rank 0, reading the whole machine.

    RAPL reads a CPU package whole and NVML a GPU whole, whichever process asks, so a meter in every worker would
    count a node once per worker on it. Local rank 0 measures its node (CPUs, memory, and the GPUs of the node's
    workers: Ray Train's TorchConfig shares CUDA_VISIBLE_DEVICES between them), the other workers measure nothing,
    and :meth:`total` adds the nodes up with an all-reduce, so a run on several nodes counts each node once. Other
    work on a node the run shares is counted too. Checkpoints carry the count: each holds the energy so far (with
    the earlier attempts'), and a worker group restarted after a failure resumes from it, so only the energy
    between the last checkpoint and the failure is missing."""

    def __init__(self, config: dict) -> None:
        import ray.train
        from vocadapt.platform.energy import StageMeter

        self.country = config.get("energy_country")
        measures = bool(self.country) and ray.train.get_context().get_local_rank() == 0
        self.meter = StageMeter("lapt", country_iso_code=self.country or "", enabled=measures)
        self.meter.start()
        self.before = None  # EnergyReading of the attempts before a restart, from the checkpoint resumed

    def resume(self, resume_dir: str | None) -> None:
        from vocadapt.platform.energy import EnergyReading

        saved = Path(resume_dir) / ENERGY_FILE if resume_dir else None
        if self.country and saved and saved.is_file():
            self.before = EnergyReading.from_dict(json.loads(saved.read_text(encoding="utf-8")))

    def total(self, *, stop: bool) -> dict[str, Any]:
        """Every node's reading so far plus the earlier attempts', as ``EnergyReading.as_dict()`` with
        ``before_restart_kwh``; {} when nothing is measured. A collective: every worker calls it."""
        reading = self.meter.stop() if stop else self.meter.so_far()
        if not self.country:
            return {}
        import ray.train.torch
        from vocadapt.platform.energy import sum_over_workers

        summed = sum_over_workers(reading, ray.train.torch.get_device())
        if not summed.mode:
            return {}
        if self.before is not None:
            summed.add(self.before)
        return summed.as_dict() | {"before_restart_kwh": self.before.kwh if self.before else 0.0}

    def checkpoint_hook(self, report):
        """``report`` (``_report_checkpoint``) with the energy so far added to the checkpoint by rank 0."""

        def hook(step: int, write, metrics: dict) -> None:
            import ray.train

            energy = self.total(stop=False)

            def write_with_energy(folder: Path) -> None:
                write(folder)
                if energy and ray.train.get_context().get_world_rank() == 0:
                    (folder / ENERGY_FILE).write_text(json.dumps(energy), encoding="utf-8")

            report(step, write_with_energy, metrics)

        return hook


def _engine_factory(settings: LaptSection):
    if not settings.deepspeed.enabled:
        return None
    from vocadapt.platform.lapt.deepspeed_config import deepspeed_engine_factory

    return deepspeed_engine_factory(settings.deepspeed, settings)


def _report_checkpoint(step: int, write, metrics: dict) -> None:
    """Every rank writes its own files into a temporary folder; Ray merges them into one checkpoint per step."""
    import ray.train

    with tempfile.TemporaryDirectory() as folder:
        write(Path(folder))
        ray.train.report({"step": step, "loss": metrics["loss"]},
                         checkpoint=ray.train.Checkpoint.from_directory(folder), checkpoint_dir_name=f"step-{step:06d}")


# The folder name of a finished run's checkpoint, which holds the trained model and final.json (ray_train reads it)
FINAL_CHECKPOINT = "final"


def _report_final(result, tokenizer, rank: int, energy: dict[str, Any] | None = None) -> None:
    """Rank 0 saves the trained model (safetensors) with its tokenizer, the metric history and the energy."""
    import ray.train

    with tempfile.TemporaryDirectory() as folder:
        save_model(result.model, tokenizer, Path(folder) / "model", rank)
        if rank == 0:
            (Path(folder) / "final.json").write_text(json.dumps(run_summary(result, energy)), encoding="utf-8")
        checkpoint = ray.train.Checkpoint.from_directory(folder) if rank == 0 else None
        ray.train.report({"step": result.steps, "final": 1}, checkpoint=checkpoint,
                         checkpoint_dir_name=FINAL_CHECKPOINT)


def run_summary(result, energy: dict[str, Any] | None) -> dict[str, Any]:
    """What ``final.json`` holds about a finished run (``ray_train.run_result`` reads it back)."""
    return {"steps": result.steps, "tokens": result.tokens, "history": result.history,
            "trainable_parameters": result.trainable_parameters, "energy": energy or {}}


def save_model(model, tokenizer, folder: Path, rank: int) -> None:
    """save_pretrained on rank 0; under ZeRO-3 every rank first takes part in gathering the full parameters."""
    params = list(model.parameters())
    gathered = nullcontext()
    if any(hasattr(p, "ds_id") for p in params):
        import deepspeed

        gathered = deepspeed.zero.GatheredParameters(params, modifier_rank=None)
    with gathered:
        if rank == 0:
            model.save_pretrained(folder, safe_serialization=True)
            save_tokenizer(tokenizer, folder)


def _report_again(checkpoint: Path, rank: int) -> None:
    import ray.train

    with tempfile.TemporaryDirectory() as folder:
        if rank == 0:
            shutil.copytree(checkpoint, folder, dirs_exist_ok=True)
        summary = json.loads((checkpoint / "final.json").read_text(encoding="utf-8"))
        ray.train.report({"step": summary["steps"], "final": 1},
                         checkpoint=ray.train.Checkpoint.from_directory(folder) if rank == 0 else None,
                         checkpoint_dir_name=FINAL_CHECKPOINT)
