"""The ``lapt`` pipeline: continued pre-training of one model on Ray Train, tracked in one MLflow run.

Setup (budget, inputs, model folder, held-out text), then one run that trains on Ray and scores held-out bits per
byte at the end. ``vocadapt lapt`` and the MLproject's ``lapt`` entry point call :func:`run_lapt`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from vocadapt.components.errors import UserError
from vocadapt.platform.config import ExperimentConfig
from vocadapt.platform.energy import EnergyLedger, EnergyReading, check_country, log_energy
from vocadapt.platform.model_loading import check_teacher
from vocadapt.platform.sources import read_documents, resolve_inputs
from vocadapt.platform.storage import locate
from vocadapt.platform.tracking import Tracker, resolve_tracking_uri

if TYPE_CHECKING:
    from vocadapt.platform.ray_train import LaptRunResult


def run_lapt(config: ExperimentConfig, model: Path | None, output: Path | None) -> LaptRunResult:
    """Resolve inputs, open an MLflow run, train on Ray; returns the ``LaptRunResult``."""
    from vocadapt.platform.ray_train import run_lapt_on_ray

    if not config.lapt.has_budget:
        raise UserError("lapt has no budget: set lapt.max_steps or lapt.max_tokens to a positive number")
    if config.tracking.energy:
        check_country(config.tracking.country_iso_code)
    inputs = resolve_inputs(config)
    model_dir = Path(model or inputs.source_model)
    if not model_dir.is_dir():
        raise UserError(f"model {model_dir} is not a local folder; pass --model with a saved model folder "
                        "(run `vocadapt assets` for the embedded default)")
    teacher_dir = check_teacher(config.lapt, inputs.source_model)
    if config.lapt.storage_path:  # a missing bucket or an unreachable store stops here, before the run exists
        locate(config.lapt.storage_path, field="lapt.storage_path").check_reachable("lapt.storage_path")
    workdir = Path(config.output_dir) / config.name
    held_out = {"target": read_documents(inputs.target_validation, config.evaluation.max_documents),
                "source": read_documents(inputs.source_validation, config.evaluation.max_documents)}
    tracker = Tracker(resolve_tracking_uri(config.tracking.tracking_uri), config.tracking.experiment)
    with tracker.run(f"{config.name}-lapt", tags={"vocadapt.stage": "lapt", "vocadapt.model": str(model_dir)}) as run:
        tracker.log_params(run.info.run_id, {k: v for k, v in config.flat().items() if k.startswith("lapt.")})
        result = run_lapt_on_ray(
            model_dir, model_dir, config.lapt, target_files=list(inputs.target_train),
            source_files=list(inputs.source_train), eval_documents={k: v for k, v in held_out.items() if v},
            output_dir=output or workdir / "lapt", run_name=f"{config.name}-lapt",
            storage_path=config.lapt.storage_path or (workdir / "ray").resolve(),
            tracking_uri=tracker.tracking_uri, mlflow_run_id=run.info.run_id,
            energy_country=config.tracking.country_iso_code if config.tracking.energy else None,
            teacher_dir=teacher_dir,
        )
        energy = EnergyLedger(config.tracking.country_iso_code)
        if result.energy:  # measured in the Ray workers, summed over nodes
            energy.add(EnergyReading.from_dict(result.energy))
        log_energy(tracker, run.info.run_id, energy)
        return result
