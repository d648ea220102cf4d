"""The ``lapt`` pipeline: continued pre-training of one model on Ray Train (or in this process), tracked in one
MLflow run.

Setup (budget, inputs, model folder, held-out text), then one run that trains on Ray and scores held-out bits per
byte at the end. ``vocadapt lapt`` and the MLproject's ``lapt`` entry point call :func:`run_lapt`.

:class:`LaptRequest` is the one way a pipeline asks for a LAPT run (``lapt`` here, each method of ``adapt`` and so
each trial of an adapt sweep): the text streams, the teacher, where Ray keeps the run and where the model is written
are decided in it, once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vocadapt.components.errors import UserError
from vocadapt.platform.config import ExperimentConfig
from vocadapt.platform.energy import EnergyLedger, EnergyReading, check_country, log_energy
from vocadapt.platform.lapt.resources import check_lapt_resources
from vocadapt.platform.model_loading import check_teacher
from vocadapt.platform.assets.sources import read_documents, resolve_inputs
from vocadapt.platform.data.storage import locate
from vocadapt.platform.tracking import Tracker, resolve_tracking_uri

if TYPE_CHECKING:
    from vocadapt.platform.lapt.ray_train import LaptRunResult
    from vocadapt.platform.assets.sources import ResolvedInputs


@dataclass(frozen=True)
class LaptRequest:
    """One LAPT run of ``model_dir`` (its own tokenizer) under ``config.lapt``, on the config's text streams.

    run_name: Ray's name for the run (a resumed run continues under it). workdir: the pipeline's folder for this
    model; Ray's checkpoints go to ``lapt.storage_path`` or ``workdir/ray``, the model to ``output_dir`` (default
    ``workdir/lapt``). held_out: documents per stream, scored during and after the run (empty streams dropped).
    """

    config: ExperimentConfig
    inputs: ResolvedInputs
    model_dir: Path
    run_name: str
    workdir: Path
    held_out: dict[str, list[str]]
    output_dir: Path | None = None

    def run(self, tracking_uri: str | None, mlflow_run_id: str | None) -> LaptRunResult:
        """Train on Ray Train (or in this process, ``lapt.runner: in_process``), logging to ``mlflow_run_id``; the
        teacher of a 'distill' objective is ``lapt.teacher`` or the source model, decided and checked once, in the
        run's plan (:func:`check_teacher`)."""
        from vocadapt.platform.lapt.in_process import fit_lapt_in_process
        from vocadapt.platform.lapt.ray_train import LaptInputs, LaptPlacement, LaptTracking, fit_lapt, plan_lapt
        from vocadapt.platform.lapt.worker import lapt_worker

        from vocadapt.pipelines.vocabulary_steps import lapt_language_files

        config = self.config
        streams = lapt_language_files(config, self.inputs)  # several target languages: a stream each
        settings = config.lapt if streams is None else config.lapt.model_copy(update={"train_files": streams})
        inputs = LaptInputs(
            list(self.inputs.target_train), list(self.inputs.source_train),
            eval_documents={stream: documents for stream, documents in self.held_out.items() if documents},
            teacher_dir=self.inputs.source_model,  # the default teacher; Ray's plan decides (check_teacher)
        )
        placement = LaptPlacement(self.output_dir or self.workdir / "lapt", self.run_name,
                                  storage_path=config.lapt.storage_path or (self.workdir / "ray").resolve())
        tracking = LaptTracking(tracking_uri, mlflow_run_id,
                                energy_country=config.tracking.country_iso_code if config.tracking.energy else None)
        plan = plan_lapt(self.model_dir, self.model_dir, settings, inputs, placement=placement, tracking=tracking)
        if settings.runner == "in_process":
            return fit_lapt_in_process(plan)
        return fit_lapt(lapt_worker, plan)


def run_lapt(config: ExperimentConfig, model: Path | None, output: Path | None) -> LaptRunResult:
    """Resolve inputs, open an MLflow run, train on Ray; returns the ``LaptRunResult``."""
    if not config.lapt.has_budget:
        raise UserError("lapt has no budget: set lapt.max_steps or lapt.max_tokens to a positive number")
    if config.tracking.energy:
        check_country(config.tracking.country_iso_code)
    inputs = resolve_inputs(config)
    model_dir = Path(model or inputs.source_model)
    if not model_dir.is_dir():
        raise UserError(f"model {model_dir} is not a local folder; pass --model with a saved model folder "
                        "(run `vocadapt assets` for the embedded default)")
    check_teacher(config.lapt, inputs.source_model)  # before the run opens
    check_lapt_resources(config.lapt)  # workers the cluster can place (Ray would wait for ever)
    if config.lapt.storage_path:  # a missing bucket or an unreachable store stops here, before the run exists
        locate(config.lapt.storage_path, field="lapt.storage_path").check_reachable("lapt.storage_path")
    workdir = Path(config.output_dir) / config.name
    held_out = {"target": read_documents(inputs.target_validation, config.evaluation.max_documents),
                "source": read_documents(inputs.source_validation, config.evaluation.max_documents)}
    tracker = Tracker(resolve_tracking_uri(config.tracking.tracking_uri), config.tracking.experiment)
    with tracker.run(f"{config.name}-lapt", tags={"vocadapt.stage": "lapt", "vocadapt.model": str(model_dir)}) as run:
        tracker.log_params(run.info.run_id, {k: v for k, v in config.flat().items() if k.startswith("lapt.")})
        request = LaptRequest(config, inputs, model_dir, f"{config.name}-lapt", workdir, held_out, output)
        result = request.run(tracker.tracking_uri, run.info.run_id)
        energy = EnergyLedger(config.tracking.country_iso_code)
        if result.energy:  # measured in the Ray workers, summed over nodes
            energy.add(EnergyReading.from_dict(result.energy))
        log_energy(tracker, run.info.run_id, energy)
        return result
