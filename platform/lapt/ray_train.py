"""LAPT on Ray Train V2, the driver: the loop of ``components.training`` inside ``TorchTrainer`` workers
(:func:`~vocadapt.platform.lapt.worker.lapt_worker`, in ``platform/lapt/worker.py``, is what each worker runs).

Each worker loads the model and tokenizer from disk, reads its shard of the mixed text (files or Hugging Face
datasets), and runs ``train_lapt`` under the process group Ray set up (gloo on CPU, NCCL on GPU), with DeepSpeed
when the config asks. Checkpoints go to ``storage_path/run_name`` through ``ray.train.report``: every rank writes
its own files (loop state, data position, RNG; DeepSpeed's optimizer shards) into the same checkpoint folder.
``storage_path`` is a local folder or a storage URI (``s3://bucket/prefix``, ``gs://``, ``file://``; see
``platform/data/storage.py``): on a cluster it must be storage every node reaches, so that a group restarted on other
nodes finds the checkpoints. A
killed worker makes Ray restart the group (``FailureConfig``) and every worker resumes from the latest checkpoint;
a rerun with the same run name and storage path resumes the same way. Rank 0 logs metrics into the MLflow run the
pipeline opened, skipping steps that run already holds, so a resumed run continues the curve instead of repeating
it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from vocadapt.components.typed_settings import validation_problems
from vocadapt.platform.config.lapt_sections import ConfigError, LaptSection
from vocadapt.platform.lapt.resources import check_lapt_resources, local_cluster_cpus, worker_request
from vocadapt.platform.lapt.progress import PROGRESS_ENV, PROGRESS_FILE, follow_progress, ray_logs_dir
from vocadapt.platform.lapt.worker import FINAL_CHECKPOINT, lapt_worker
from vocadapt.platform.model_loading import check_teacher
from vocadapt.platform.data.storage import StorageLocation, locate


@dataclass
class LaptRunResult:
    """What a Ray LAPT run leaves: the trained model folder (safetensors + tokenizer) and its metrics.

    Also readable as a mapping (``result["model_dir"]``)."""

    model_dir: Path
    history: list[tuple[int, dict[str, float]]]
    bits_per_byte: dict[str, float]  # stream -> held-out bits per byte after the last step
    steps: int
    tokens: int
    trainable_parameters: dict[str, int]
    tokens_per_second: float  # median over logged steps, all workers, real tokens only
    checkpoint_path: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    # energy.EnergyReading.as_dict() of the whole run, summed over nodes; {} when not measured
    energy: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def series(self, name: str) -> list[tuple[int, float]]:
        return [(step, metrics[name]) for step, metrics in self.history if name in metrics]


# Set to 1 to see every Ray process's output on the console again (debugging a worker by its prints).
RAY_CONSOLE_ENV = "VOCADAPT_RAY_CONSOLE"


PREEMPTION_WATCHER_ENV = "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER"


def init_ray(num_cpus: int = 2) -> None:
    """Connect to the cluster in ``RAY_ADDRESS`` or start a local one; a second call in the process is a no-op.

    Ray's own output stays in its session log folder (:func:`ray_logs_dir`), not on the console: forwarded, the
    demo's console was 682 lines, 513 of them Ray's (controller polls, core-worker notices, worker logs) between
    the pipeline's steps. LAPT's progress reaches the console from the driver (:func:`~vocadapt.platform.lapt.progress.follow_progress`) and a
    worker's error in the exception ``fit`` raises, with where the full logs are."""
    import logging

    import ray

    if ray.is_initialized():
        return
    quiet = {"include_dashboard": False, "log_to_driver": os.environ.get(RAY_CONSOLE_ENV) == "1",
             "logging_level": logging.ERROR}  # the driver's own Ray logger: start-up notices and warnings
    if os.environ.get("RAY_ADDRESS"):
        ray.init(**quiet)
    else:
        # Nothing drains the nodes of a cluster started here (this one machine): Ray Train's preemption watcher, an
        # actor and so a Python process per run, would only poll for drains that never come. A value the user set
        # is kept; a cluster of RAY_ADDRESS keeps Ray's default.
        os.environ.setdefault(PREEMPTION_WATCHER_ENV, "0")
        ray.init(num_cpus=num_cpus, **quiet)


def lapt_section(settings: LaptSection | dict) -> LaptSection:
    """The config's ``lapt`` section as it is, or one validated from a mapping of its fields (unknown keys
    refused with the nearest valid name)."""
    if isinstance(settings, LaptSection):
        return settings
    try:
        return LaptSection.model_validate(settings)
    except ValidationError as error:
        raise ConfigError("invalid LAPT settings:\n  " + "\n  ".join(validation_problems(error, "lapt"))) from error


@dataclass
class LaptPlan:
    """One LAPT run, checked and ready for Ray: what every worker receives (``loop_config``) and where it runs."""

    section: LaptSection
    loop_config: dict[str, Any]
    run_name: str
    storage: StorageLocation  # where Ray keeps the run's checkpoints: a local folder or a URI
    output_dir: Path
    # custom Ray resources each worker asks for besides its CPUs (and GPU), to pin workers to nodes that have them
    worker_resources: dict[str, float] = field(default_factory=dict)

    @property
    def progress_file(self) -> Path:
        """Rank 0's progress file, followed by the driver: beside the checkpoints when they are on the local disk,
        else in the (local) output folder."""
        local = self.storage.local
        return (local / self.run_name if local is not None else self.output_dir.resolve()) / PROGRESS_FILE


@dataclass(frozen=True)
class LaptInputs:
    """What a LAPT run reads besides the model it trains: the text per stream and the teacher.

    ``settings.train_files`` wins over the files when set, and a stream in ``settings.datasets`` reads that Hugging
    Face dataset instead (each worker loading and streaming its own part)."""

    target_files: list[str | Path]
    source_files: list[str | Path] | None = None
    eval_documents: dict[str, list[str]] | None = None  # held-out documents per stream, scored during and after
    teacher_dir: str | Path | None = None  # the model to distil from under a 'distill' objective (lapt.teacher wins)


@dataclass(frozen=True)
class LaptPlacement:
    """Where a LAPT run runs and writes: its name (a rerun under it resumes), the folder the trained model goes to,
    where Ray keeps the checkpoints, and the custom resources that pin its workers to nodes."""

    output_dir: str | Path
    run_name: str
    storage_path: str | Path | None = None  # a folder or a storage URI (``s3://bucket/prefix``); checked reachable
    # custom Ray resources every worker asks for (``{"trainer_node": 1}``: one worker per node that offers one)
    worker_resources: dict[str, float] | None = None


@dataclass(frozen=True)
class LaptTracking:
    """What a LAPT run records besides its checkpoints: the MLflow run rank 0 logs into, and the energy grid."""

    tracking_uri: str | None = None
    mlflow_run_id: str | None = None
    energy_country: str | None = None  # measure energy and CO2 on this grid (ISO alpha-3 code); None: nothing


def plan_lapt(model_dir: str | Path, tokenizer_dir: str | Path, settings: LaptSection | dict, inputs: LaptInputs, *,
              placement: LaptPlacement, tracking: LaptTracking = LaptTracking()) -> LaptPlan:
    """Check the inputs of a LAPT run (files exist, every stream with a share has text) before Ray starts.

    settings: the config's ``lapt`` section (or a mapping of its fields); its ``seed`` seeds the run.
    """
    target_files, source_files, eval_documents = inputs.target_files, inputs.source_files, inputs.eval_documents
    output_dir, storage_path = placement.output_dir, placement.storage_path
    section = lapt_section(settings)
    teacher_dir = check_teacher(section, inputs.teacher_dir)
    files = section.train_files or {"target": [str(p) for p in target_files],
                                    "source": [str(p) for p in source_files or []]}
    datasets = section.datasets or {}
    files = {stream: paths for stream, paths in files.items() if stream not in datasets}  # a dataset replaces them
    _check_sources(files, datasets, section.mixing)
    storage = locate(storage_path or section.storage_path or Path(output_dir) / "ray", field="lapt.storage_path")
    storage.check_reachable("lapt.storage_path")
    loop_config = {
        "model_dir": str(Path(model_dir).resolve()), "tokenizer_dir": str(Path(tokenizer_dir).resolve()),
        "settings": section, "train_files": files, "eval_documents": eval_documents or {},
        "tracking_uri": tracking.tracking_uri, "mlflow_run_id": tracking.mlflow_run_id,
        "energy_country": tracking.energy_country,
        "teacher_dir": str(teacher_dir.resolve()) if teacher_dir else None,
    }
    return LaptPlan(section, loop_config, placement.run_name, storage, Path(output_dir),
                    dict(placement.worker_resources or {}))


def fit_lapt(train_loop: Callable[[dict], None], plan: LaptPlan) -> LaptRunResult:
    """Run ``train_loop`` (normally :func:`lapt_worker`) in every Ray Train worker of ``plan``; collect the model."""
    check_lapt_resources(plan.section, plan.worker_resources)  # before the run's record is written
    run_folder = plan.storage / plan.run_name
    _claim_run_name(run_folder, plan.loop_config)
    finished = _finished_checkpoint(run_folder)
    if finished is not None:  # a finished run rerun under its name: its model, without starting a worker group
        from ray.train import Checkpoint

        return _collect(Checkpoint(path=finished.path, filesystem=finished.filesystem), plan.output_dir)
    return _collect(_fit(train_loop, plan).checkpoint, plan.output_dir)


def _finished_checkpoint(run_folder: StorageLocation) -> StorageLocation | None:
    """The run's ``final`` checkpoint when Ray recorded it as the run's latest: its checkpoint manager's snapshot
    names it only once the checkpoint is stored whole, and the worker reports it only with the trained model and
    ``final.json``. None otherwise, and when the snapshot cannot be read (another Ray version's layout): Ray Train's
    own restore then finds the finished run, in a worker group started for it (10 to 40 s on two busy cores)."""
    snapshot = run_folder / "checkpoint_manager_snapshot.json"
    try:
        if not snapshot.is_file():
            return None
        latest = json.loads(snapshot.read_text())["latest_checkpoint_result"]["checkpoint_dir_name"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    final = run_folder / FINAL_CHECKPOINT
    return final if latest == FINAL_CHECKPOINT and (final / "final.json").is_file() else None


def run_lapt_on_ray(model_dir: str | Path, tokenizer_dir: str | Path, settings: LaptSection | dict,
                    inputs: LaptInputs, *, placement: LaptPlacement,
                    tracking: LaptTracking = LaptTracking()) -> LaptRunResult:
    """Continue pre-training the model in ``model_dir`` on Ray Train; returns the trained model folder and metrics.

    The arguments are :func:`plan_lapt`'s. The trained model is written to ``placement.output_dir/model``.
    (``lapt.runner: in_process`` runs the same plan without Ray:
    :func:`~vocadapt.platform.lapt.in_process.fit_lapt_in_process`.)
    """
    return fit_lapt(lapt_worker, plan_lapt(model_dir, tokenizer_dir, settings, inputs, placement=placement,
                                           tracking=tracking))


# Settings a run may change when it is resumed under its name; anything else would resume a different experiment.
_RESUMABLE_CHANGES = {"eval_every", "log_every", "checkpoint_every", "max_failures", "storage_path", "peak_flops",
                      "eval_max_length", "eval_batch_size", "enabled"}


def _claim_run_name(run_folder: StorageLocation | Path, loop_config: dict) -> None:
    """Record what a run name trains; a rerun under the name with other inputs is refused, not silently resumed.
    The record sits beside the run's checkpoints (a local folder or object storage)."""
    run_folder = locate(run_folder)
    settings = loop_config["settings"]
    settings = settings.model_dump(mode="json") if isinstance(settings, LaptSection) else settings
    identity = {
        "model_dir": loop_config["model_dir"], "tokenizer_dir": loop_config["tokenizer_dir"],
        "train_files": loop_config["train_files"],
        "settings": {k: v for k, v in settings.items() if k not in _RESUMABLE_CHANGES},
    }
    record = run_folder / "vocadapt_lapt_run.json"
    if record.is_file():
        previous = json.loads(record.read_text())
        changed = sorted(k for k in {*previous, *identity} if previous.get(k) != identity.get(k))
        changed += sorted(f"settings.{k}" for k in {*previous.get("settings", {}), *identity["settings"]}
                          if previous.get("settings", {}).get(k) != identity["settings"].get(k))
        changed = [c for c in changed if c != "settings"]
        if changed:
            parent = str(run_folder).rstrip("/").rsplit("/", 1)[0]  # credentials masked
            raise ConfigError(
                f"a LAPT run named {run_folder.name!r} already exists in {parent} with other inputs "
                f"({', '.join(changed)}); rerunning a name resumes it, so choose a new run name or delete {run_folder}")
        return
    run_folder.mkdir()
    record.write_text(json.dumps(identity, indent=2))


def _check_sources(files: dict[str, list[str]], datasets: dict, mixing: dict[str, float]) -> None:
    """Every stream with a share has files or a dataset, and every local file named exists, before Ray starts."""
    for stream, share in mixing.items():
        if share > 0 and not files.get(stream) and stream not in datasets:
            raise ConfigError(f"lapt.mixing gives {stream!r} a share of {share} but no {stream} training files "
                              f"or dataset were given; list them (lapt.train_files.{stream} or "
                              f"lapt.datasets.{stream}) or set its share to 0")
    for stream, paths in files.items():
        for path in paths:
            if not Path(path).is_file():
                raise ConfigError(f"LAPT {stream} file {path} does not exist; fix the path in the config")
    for stream, source in datasets.items():
        for path in source.data_files or []:
            if not Path(path).is_file():
                raise ConfigError(f"lapt.datasets.{stream}.data_files: {path} does not exist; fix the path")


def _fit(train_loop: Callable[[dict], None], plan: LaptPlan):
    from ray.train import (
        CheckpointConfig,
        FailureConfig,
        RunConfig,
        ScalingConfig,
        TrainingFailedError,
    )
    from ray.train.torch import TorchConfig, TorchTrainer

    section, run_name = plan.section, plan.run_name
    init_ray(num_cpus=local_cluster_cpus(section))
    # connected now: a RAY_ADDRESS cluster short of the workers' resources is named (Ray waits for nodes to join)
    check_lapt_resources(section, plan.worker_resources, warn=lambda message: print(message, file=sys.stderr))
    passed_env = {k: v for k, v in os.environ.items() if k.startswith(("HF_", "TRANSFORMERS_", "VOCADAPT_"))}
    progress_file = plan.progress_file
    progress_file.unlink(missing_ok=True)  # a resumed run's old figures are not this attempt's
    passed_env[PROGRESS_ENV] = str(progress_file)
    trainer = TorchTrainer(
        train_loop,
        train_loop_config=plan.loop_config,
        torch_config=TorchConfig(backend="nccl" if section.use_gpu else "gloo"),
        scaling_config=ScalingConfig(num_workers=section.num_workers, use_gpu=section.use_gpu,
                                     resources_per_worker=worker_request(section, plan.worker_resources)),
        run_config=RunConfig(
            name=run_name, **plan.storage.ray_storage(),
            checkpoint_config=CheckpointConfig(num_to_keep=2),
            failure_config=FailureConfig(max_failures=section.max_failures),
            worker_runtime_env={"env_vars": passed_env},
        ),
    )
    try:
        with follow_progress(progress_file, section.total_steps(section.num_workers)):
            result = trainer.fit()  # Ray Train V2 raises a worker's error; V1 returned it in result.error
        error = result.error
    except TrainingFailedError as raised:
        error = raised
    if error is not None:
        # the error holds the failing rank's traceback; the rest of every worker's output is only in Ray's logs
        raise RuntimeError(f"LAPT run {run_name!r} failed: {error}\nEvery worker's full log: {ray_logs_dir()} "
                           "(worker-*.err / worker-*.out)") from error
    return result


def _collect(checkpoint, output_dir: Path) -> LaptRunResult:
    """The run's result from its final checkpoint (a ``ray.train.Checkpoint``), the model copied to
    ``output_dir/model``."""
    model_dir = output_dir / "model"
    with checkpoint.as_directory() as folder:
        summary = json.loads((Path(folder) / "final.json").read_text(encoding="utf-8"))
        if model_dir.exists():
            shutil.rmtree(model_dir)
        shutil.copytree(Path(folder) / "model", model_dir)
    return run_result(summary, model_dir, checkpoint_path=checkpoint.path)


def run_result(summary: dict[str, Any], model_dir: Path, checkpoint_path: str) -> LaptRunResult:
    """A run's result from its summary (``final.json``: steps, tokens, metric history, trainable parameters,
    energy) and the folder its model was written to."""
    history = [(step, metrics) for step, metrics in summary["history"]]
    speeds = sorted(m["tokens_per_second"] for _, m in history if "tokens_per_second" in m)
    last_eval = next((m for _, m in reversed(history) if any(k.startswith("bits_per_byte_") for k in m)), {})
    return LaptRunResult(
        model_dir=model_dir, history=history,
        bits_per_byte={k.removeprefix("bits_per_byte_"): v for k, v in last_eval.items()
                       if k.startswith("bits_per_byte_")},
        steps=summary["steps"], tokens=summary["tokens"], trainable_parameters=summary["trainable_parameters"],
        tokens_per_second=speeds[len(speeds) // 2] if speeds else 0.0, checkpoint_path=checkpoint_path,
        energy=summary.get("energy", {}),
    )
