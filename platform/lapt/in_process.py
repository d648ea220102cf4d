"""LAPT in the pipeline's own process (``lapt.runner: in_process``): the loop of ``components.training`` on one
worker, without Ray.

It takes the plan a Ray run takes (:func:`~vocadapt.platform.lapt.ray_train.plan_lapt`: the inputs checked, the
teacher decided) and does what one Ray Train worker does (the model, tokenizer, teacher and text loaded the same way,
rank 0's MLflow logging and energy meter, the model saved as safetensors), and it returns the same
:class:`~vocadapt.platform.lapt.ray_train.LaptRunResult`. What it leaves out is what only Ray gives: several workers
or nodes, DeepSpeed, and checkpoints that a restarted worker group resumes from (the config refuses those settings
with this runner). A two-step run of a small model spends most of its time starting Ray Train's controller and
worker processes; here it spends none.
"""

from __future__ import annotations

import json
import shutil

from vocadapt.platform.lapt.progress import PROGRESS_FILE, follow_progress, worker_phase_progress, worker_progress
from vocadapt.platform.lapt.resources import check_lapt_resources
from vocadapt.platform.lapt.ray_train import LaptPlan, LaptRunResult, run_result
from vocadapt.platform.lapt.worker import load_inputs, run_summary, save_model

FINAL_FILE = "final.json"  # the run's summary beside the model, as a Ray run's final checkpoint holds it


def fit_lapt_in_process(plan: LaptPlan) -> LaptRunResult:
    """Train ``plan``'s model here, on its CPU or (``lapt.use_gpu``) its first GPU; write it to
    ``plan.output_dir/model``."""
    import torch

    from vocadapt.components import training
    from vocadapt.platform.energy import StageMeter

    settings, config = plan.section, plan.loop_config
    check_lapt_resources(settings)  # lapt.use_gpu needs a CUDA device here
    inputs = load_inputs(config, settings, torch.device("cuda" if settings.use_gpu else "cpu"), logs=True)
    country = config.get("energy_country")
    meter = StageMeter("lapt", country_iso_code=country or "", enabled=bool(country))

    output_dir = plan.output_dir
    output_dir.mkdir(parents=True, exist_ok=True)
    progress_file = output_dir / PROGRESS_FILE
    progress_file.unlink(missing_ok=True)
    total_steps = settings.total_steps(1)
    hooks = training.LaptHooks(logger=inputs.logger, on_step=worker_progress(0, total_steps, str(progress_file)),
                               on_phase=worker_phase_progress(0, str(progress_file)))
    runtime = training.LaptRuntime(eval_documents=config["eval_documents"], distillation=inputs.distillation)
    meter.start()
    with follow_progress(progress_file, total_steps, on_ray=False):
        result = training.train_lapt(inputs.model, inputs.tokenizer, inputs.data, settings, hooks=hooks, runtime=runtime)
    reading = meter.stop()
    if reading.mode:  # worded as a Ray run's sum over its nodes' meters (energy.sum_over_workers): here one meter
        reading.mode = f"{reading.mode}; meters summed: 1"

    model_dir = output_dir / "model"
    if model_dir.exists():
        shutil.rmtree(model_dir)
    save_model(result.model, inputs.tokenizer, model_dir, rank=0)
    summary = run_summary(result, reading.as_dict() | {"before_restart_kwh": 0.0} if reading.mode else None)
    (output_dir / FINAL_FILE).write_text(json.dumps(summary), encoding="utf-8")
    return run_result(summary, model_dir, checkpoint_path="")
