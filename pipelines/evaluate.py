"""The ``evaluate`` pipeline: score a model on a suite, measure generation side by side with its source model,
compare embedding structure, and log every number to MLflow.

Reads top to bottom: resolve the model (a folder or ``models:/name@alias``) and the suite, build the tasks, then
(1) lm-eval benchmarks (cloze ``acc_bytes``, translation chrF; with ``generation.backend: vllm`` the generative
tasks go to a vLLM server for the model's folder), (2) bits per byte on held-out text, (3) generation throughput,
%Gen and speed-up against ``compare_to`` on the same prompts, (4) embedding similarity, (5) report.

Metric names (one evaluation run per call, in the model's experiment):

- ``benchmark.<task>.<metric>`` and, with ``compare_to``, ``source_model.benchmark.<task>.<metric>`` (the names
  the registry's promotion gates read); when the model is a registered version they are also logged on the
  version's own run, so ``vocadapt promote`` sees them;
- ``bpb.<lang>`` / ``source_model.bpb.<lang>``; ``parameters.*`` / ``source_model.parameters.*``;
- ``generation.<task>.<rate|chrf|percent_generated_new>``, ``source_model.generation.<task>.*``,
  ``speed_up.<task>.<rate>`` and ``speed_up.<rate>`` over all generation tasks;
- ``similarity.<a>__<b>``, with ``similarity/similarity.{json,png}`` artifacts;
- ``energy.evaluation.kwh`` / ``emissions.evaluation.kg_co2eq`` and the same as ``energy.total.kwh`` /
  ``emissions.total.kg_co2eq`` (codecarbon, offline, on the grid of ``country_iso_code``).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from vocadapt.components.errors import UserError
from vocadapt.platform.config import TrackingSection
from vocadapt.platform.energy import EnergyLedger, check_country, log_energy, measure_energy
from vocadapt.platform.evaluation.suites import SuiteConfig, load_suite
from vocadapt.platform.model_loading import check_model_folder
from vocadapt.platform.tracking import Tracker, git_commit, resolve_tracking_uri

DEFAULT_EXPERIMENT = "vocadapt"


@dataclass
class EvaluationRequest:
    model: str  # a model folder or models:/name@alias
    suite: str = "offline"
    compare_to: str | None = None  # the source model folder, for side-by-side generation and benchmarks
    helper: str | None = None  # a model using the target tokenizer, for embedding similarity (SAVA §6)
    similar_to: list[str] = field(default_factory=list)  # other adapted models for inter-model similarity
    suite_overrides: dict[str, str] = field(default_factory=dict)
    experiment: str | None = None  # default: the registered model's experiment, else "vocadapt"
    tracking_uri: str | None = None
    work_dir: Path | None = None  # where tasks and artifacts are built (default: a temporary folder)
    held_out: Any = None  # HeldOutData; default: the embedded corpora's test split
    # energy and CO2 of the evaluation (energy.evaluation.kwh, emissions.evaluation.kg_co2eq) on this country's grid
    country_iso_code: str = TrackingSection.model_fields["country_iso_code"].default
    energy: bool = True


@dataclass
class EvaluationResult:
    run_id: str
    experiment_id: str
    metrics: dict[str, float]
    model_dir: Path
    lineage: dict[str, str]


@dataclass
class ResolvedModel:
    path: Path
    lineage: dict[str, str]  # tags linking the evaluation to the model version
    version_run_id: str | None = None
    experiment_id: str | None = None


def run_evaluate(request: EvaluationRequest, console: Console | None = None) -> EvaluationResult:
    console = console or Console()
    # ---- setup: every input is checked before a run is opened
    suite = load_suite(request.suite, request.suite_overrides)
    if request.energy:
        check_country(request.country_iso_code)
    # safetensors only, no custom code: refused before any folder or run exists, not when the weights load
    for role, path in (("--model", request.model), ("--compare-to", request.compare_to),
                       *(("--similar-to", p) for p in request.similar_to)):
        if path is not None:
            check_model_folder(path, what=role)  # a folder; a models:/ reference is checked once downloaded
    tracking_uri = resolve_tracking_uri(request.tracking_uri)
    made_work_dir = request.work_dir is None or not Path(request.work_dir).exists()
    work_dir = Path(request.work_dir or tempfile.mkdtemp(prefix="vocadapt-evaluate-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    try:  # a refusal below leaves no work folder behind (one the user made is kept)
        resolved = resolve_model(request.model, tracking_uri, work_dir / "model")
        others = {"source_model": request.compare_to, "helper": request.helper}
        for role, path in [*others.items(), *((f"similar_to[{i}]", p) for i, p in enumerate(request.similar_to))]:
            if path is not None and not (Path(path) / "config.json").is_file():
                raise UserError(f"{role}: {path} is not a model folder; pass a folder with config.json and weights")
        check_model_folder(resolved.path, what="--model")  # a registered model, once downloaded
        _check_tokenizer_loads(resolved.path)
        tasks = _build_tasks(suite, request, work_dir, console)
    except BaseException:
        if made_work_dir:
            shutil.rmtree(work_dir, ignore_errors=True)
        raise
    tracker = Tracker(tracking_uri, request.experiment or _experiment_name(tracking_uri, resolved))

    lineage = resolved.lineage | {"vocadapt.suite": suite.name, "vocadapt.suite_version": str(suite.version),
                                  "vocadapt.evaluation_commit": git_commit()}
    if request.compare_to:
        lineage["vocadapt.compared_to"] = str(request.compare_to)
    try:  # a temporary work folder does not outlive a run that failed or was interrupted
        with tracker.run(f"evaluate/{suite.name}/{_short_name(resolved)}", tags=lineage) as run:
            run_id = run.info.run_id
            tracker.log_params(run_id, {"suite": suite.name, "model": request.model, **_flat_suite(suite)})
            with measure_energy("evaluation", country_iso_code=request.country_iso_code,
                                enabled=request.energy) as reading:
                plan = EvaluationPlan(suite, request, resolved, tasks)
                metrics = _evaluate_all(plan, tracker, run_id, work_dir, console)
            energy = EnergyLedger(request.country_iso_code)
            energy.add(reading)
            log_energy(tracker, run_id, energy)
            tracker.log_dict(run_id, {"metrics": metrics, "lineage": lineage}, "evaluation.json")
    except BaseException:
        if request.work_dir is None:
            shutil.rmtree(work_dir, ignore_errors=True)
        raise
    if resolved.version_run_id:
        _log_to_version_run(tracker, resolved.version_run_id, metrics)
    _print_summary(metrics, console)
    if request.work_dir is None:
        shutil.rmtree(work_dir, ignore_errors=True)
    return EvaluationResult(run_id, tracker.experiment_id, metrics, resolved.path, lineage)


def _check_tokenizer_loads(folder: Path) -> None:
    """The model's tokenizer loads (its files were checked by ``check_model_folder``), before any run is opened."""
    from vocadapt.platform.model_loading import load_checkpoint_tokenizer

    try:
        load_checkpoint_tokenizer(folder)
    except (OSError, ValueError, TypeError) as error:
        raise UserError(f"--model {folder}: its tokenizer cannot be loaded ({str(error)[:200]}); save the model "
                        "with its tokenizer (tokenizer.save_pretrained(folder))") from error


def resolve_model(reference: str, tracking_uri: str, download_dir: Path) -> ResolvedModel:
    """A folder as it is; ``models:/name@alias`` (or ``models:/name/version``) downloaded from the registry."""
    if not reference.startswith("models:/"):
        path = Path(reference)
        if not (path / "config.json").is_file():
            raise UserError(f"--model {reference}: not a model folder (no config.json); pass a folder saved with "
                            "save_pretrained or models:/<name>@<alias>")
        return ResolvedModel(path, {"vocadapt.model_path": str(path.resolve())})
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    name, _, selector = reference.removeprefix("models:/").partition("@")
    try:
        if selector:
            version = client.get_model_version_by_alias(name, selector)
        else:
            name, _, number = name.partition("/")
            version = client.get_model_version(name, number)
    except Exception as error:  # noqa: BLE001 - mlflow raises its own kinds for unknown names and aliases
        raise UserError(f"--model {reference}: not found in the registry at {tracking_uri} ({error}); list "
                        "models with `mlflow models` or check MLFLOW_TRACKING_URI") from error
    shutil.rmtree(download_dir, ignore_errors=True)
    from vocadapt.platform.registry.mlflow_model import checkpoint_dir, download_model

    local = checkpoint_dir(download_model(version.source, download_dir, tracking_uri))  # inside its MLflow model
    lineage = {key: value for key, value in version.tags.items() if key.startswith("vocadapt.")}
    lineage |= {"vocadapt.registered_model": name, "vocadapt.model_version": str(version.version),
                "vocadapt.model_alias": selector or "", "vocadapt.model_uri": reference,
                "vocadapt.version_run_id": version.run_id or ""}
    experiment_id = client.get_run(version.run_id).info.experiment_id if version.run_id else None
    return ResolvedModel(local, lineage, version.run_id, experiment_id)


def _experiment_name(tracking_uri: str, resolved: ResolvedModel) -> str:
    if resolved.experiment_id is None:
        return DEFAULT_EXPERIMENT
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri).get_experiment(resolved.experiment_id).name


def _short_name(resolved: ResolvedModel) -> str:
    if "vocadapt.registered_model" in resolved.lineage:
        return f"{resolved.lineage['vocadapt.registered_model']}-v{resolved.lineage['vocadapt.model_version']}"
    return resolved.path.name


def _build_tasks(suite: SuiteConfig, request: EvaluationRequest, work_dir: Path, console: Console):
    if suite.kind == "cluster":
        return None
    from vocadapt.platform.evaluation.offline_tasks import HeldOutData, build_offline_tasks

    languages = sorted({*suite.cloze.languages, *(lang for pair in suite.translation.directions for lang in pair)})
    held_out = request.held_out or HeldOutData.from_embedded(languages)
    console.rule(f"[bold]tasks: suite {suite.name} v{suite.version}")
    return build_offline_tasks(suite, held_out, work_dir / "tasks")


@dataclass
class EvaluationPlan:
    """What one evaluation scores: the suite, the request, the model it resolved to and the suite's built tasks."""

    suite: SuiteConfig
    request: EvaluationRequest
    resolved: ResolvedModel
    tasks: Any


def _evaluate_all(plan: EvaluationPlan, tracker, run_id: str, work_dir: Path, console: Console) -> dict[str, float]:
    from vocadapt.pipelines.evaluate_steps import (
        Contender,
        bits_per_byte_step,
        generation_step,
        harness_step,
        load_model,
        model_servers,
        parameter_counts,
        similarity_step,
    )

    suite, request, resolved, tasks = plan.suite, plan.request, plan.resolved, plan.tasks
    metrics: dict[str, float] = {}
    model, tokenizer = load_model(resolved.path)
    contenders = {"": Contender(resolved.path, model, tokenizer)}
    if request.compare_to:
        contenders["source_model."] = Contender(Path(request.compare_to), *load_model(Path(request.compare_to)))
    # with vLLM, one server per model for its benchmarks and the generation step, stopped before similarity
    with model_servers(suite, {prefix: contender.folder for prefix, contender in contenders.items()},
                       work_dir) as servers:
        for prefix, contender in contenders.items():
            console.rule(f"[bold]benchmarks {prefix or 'model'}")
            step = parameter_counts(contender.model)
            step |= harness_step(suite, Contender(None, contender.model, contender.tokenizer), tasks,
                                 served=servers.get(prefix))
            step |= bits_per_byte_step(suite, contender.model, contender.tokenizer, request.held_out, tasks)
            metrics |= {f"{prefix}{key}": value for key, value in step.items()}
            tracker.log_metrics(run_id, {f"{prefix}{key}": value for key, value in step.items()})
        if tasks is not None and tasks.translation_tasks:
            console.rule(f"[bold]generation ({suite.generation.backend})")
            step = generation_step(suite, tasks, contenders, work_dir, console, servers=servers)
            metrics |= step
            tracker.log_metrics(run_id, step)
    peers = {"helper": request.helper, **{Path(p).name: p for p in request.similar_to}}
    peers = {name: path for name, path in peers.items() if path}
    if peers:
        console.rule("[bold]embedding similarity")
        step, artifacts = similarity_step(suite, _short_name(resolved), model, tokenizer, peers, work_dir)
        metrics |= step
        tracker.log_metrics(run_id, step)
        for path in artifacts:
            tracker.log_artifact(run_id, path, "similarity")
    return metrics


def _log_to_version_run(tracker: Tracker, version_run_id: str, metrics: dict[str, float]) -> None:
    """The promotion gates read the version's run: give it the benchmark scores with their standard errors (a gate
    without per-item parts takes its interval from them) and the tokens per generated character (and the source
    model's)."""
    gated = {key: value for key, value in metrics.items()
             if key.startswith(("benchmark.", "source_model.benchmark."))}
    gated |= {key: metrics[key] for key in ("generation.tokens_per_character",
                                            "source_model.generation.tokens_per_character",
                                            "generation.same_text_token_saving") if key in metrics}
    tracker.log_metrics(version_run_id, gated)


def _flat_suite(suite: SuiteConfig) -> dict[str, Any]:
    flat = {}
    for section, values in suite.model_dump(mode="json").items():
        if isinstance(values, dict):
            flat |= {f"suite.{section}.{key}": value for key, value in values.items()}
        else:
            flat[f"suite.{section}"] = values
    return flat


def _print_summary(metrics: dict[str, float], console: Console) -> None:
    from rich.table import Table

    table = Table(title="Evaluation")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key in sorted(metrics):
        if key.endswith("_stderr"):
            continue
        table.add_row(key, f"{metrics[key]:.4f}")
    console.print(table)


def summary_json(result: EvaluationResult) -> str:
    return json.dumps({"run_id": result.run_id, "experiment_id": result.experiment_id, "metrics": result.metrics,
                       "lineage": result.lineage}, indent=2, sort_keys=True)
