"""Sweep configs and the Ray Tune glue: a search space over dotted fields of the experiment config, ASHA on
held-out target bits per byte, one MLflow child run per trial nested under the sweep's parent run.

The config part imports nothing heavy; Ray is imported inside the functions that use it. The MLflow traps of Tune
are avoided on purpose: no ``MLflowLoggerCallback`` (it makes flat runs) and no ``setup_mlflow`` (concurrent trials
race to create the experiment); the driver creates the experiment and the parent run, each trial opens its own
child run with an explicit ``mlflow.parentRunId`` and always ends it, and ``MLFLOW_RUN_ID`` is removed before any
worker starts.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, PrivateAttr, ValidationError, model_validator

from vocadapt.components.typed_settings import validation_problems
from vocadapt.platform.config import ConfigError, ExperimentConfig, apply_override, read_yaml_mapping, set_dotted
from vocadapt.platform.config.lapt_sections import Section
from vocadapt.platform.registry.model_versions import PromotionGates
from vocadapt.platform.data.storage import StorageLocation, locate
from vocadapt.platform.sweeps.cache import CACHE_FOLDER

METRIC = "bpb_target"  # held-out target-language bits per byte: what ASHA stops on
# out-of-domain target bits per byte of a finished trial (the text the default promotion gate reads): the
# leaderboard ranks finished trials by it when every one of them has it, else by METRIC
OUT_OF_DOMAIN_METRIC = "bpb_ood_target"
STATE_FILE = "vocadapt-sweep.json"
SINGLE_METHOD_FIELD = "init.methods"


class SearchDimension(Section):
    """One field's values: give exactly one of ``grid``, ``choice``, ``uniform``, ``loguniform``, ``randint``."""

    grid: list[Any] | None = Field(None, description="Every value is tried (crossed with the other grids).")
    choice: list[Any] | None = Field(None, description="Each trial samples one value.")
    uniform: tuple[float, float] | None = Field(None, description="Each trial samples uniformly in [low, high].")
    loguniform: tuple[float, float] | None = Field(None, description="Sampled log-uniformly in [low, high].")
    randint: tuple[int, int] | None = Field(None, description="An integer sampled in [low, high).")

    @model_validator(mode="after")
    def _exactly_one(self) -> SearchDimension:
        given = [name for name in ("grid", "choice", "uniform", "loguniform", "randint") if getattr(self, name)]
        if len(given) != 1:
            raise ValueError(f"give exactly one of grid, choice, uniform, loguniform, randint (got {given or 'none'})")
        return self

    @property
    def kind(self) -> str:
        return next(n for n in ("grid", "choice", "uniform", "loguniform", "randint") if getattr(self, n))

    def values_to_check(self) -> list[Any]:
        """The values every trial could take, or a range's two ends: each is validated before the sweep."""
        return list(getattr(self, self.kind))


class SchedulerSection(Section):
    kind: Literal["asha", "fifo"] = Field("asha", description="ASHA early stopping, or run every trial to the end.")
    grace_period: int = Field(1, ge=1, description="Reports a trial makes before ASHA may stop it.")
    reduction_factor: float = Field(2.0, gt=1, description="ASHA keeps 1/reduction_factor of trials per rung.")
    max_t: int = Field(
        2, ge=1, description="Reports per trial: the objective's intermediate ones plus the final one (adapt: "
        "zero-shot bits per byte, then after LAPT)."
    )


class BudgetSection(Section):
    num_samples: int = Field(1, ge=1, description="Samples of the search space (each repeats the grid).")
    max_concurrent_trials: int = Field(2, ge=1, description="Trials run at once, as resources allow.")
    cpus_per_trial: float = Field(1.0, gt=0, description="CPUs reserved per trial (LAPT workers ask for their own).")
    gpus_per_trial: float = Field(0.0, ge=0, description="GPUs reserved per trial.")
    time_budget_s: float | None = Field(None, gt=0, description="Stop starting trials after this many seconds.")


class SweepConfig(Section):
    """A sweep: a base experiment, a search space over its dotted fields, a scheduler and a budget."""

    name: str = Field("sweep", description="Sweep name: the Tune experiment folder and the MLflow parent run.")
    base: str | dict[str, Any] = Field(
        ..., description="The base experiment: a YAML path (relative to this file) or an inline mapping."
    )
    overrides: list[str] = Field(
        default_factory=list, description="Dotted overrides applied to the base (e.g. tiny budgets: lapt.max_steps=2)."
    )
    search_space: dict[str, SearchDimension] = Field(
        ..., min_length=1, description="Dotted experiment fields to values; init.methods takes one method per trial."
    )
    scheduler: SchedulerSection = Field(default_factory=SchedulerSection)
    budget: BudgetSection = Field(default_factory=BudgetSection)
    storage_path: str = Field(
        "runs/sweeps", description="Where Tune keeps trial state (resume reads it) and the trials share their "
        "artefact cache: a folder or a storage URI (s3://bucket/prefix, gs://..., file://...) every node reaches.")
    register_best: bool = Field(True, description="Register the best trial's model with alias 'candidate'.")
    registered_model: str | None = Field(None, description="Registry name; default: the adapt pipeline's.")
    keep_models: Literal["best", "all"] = Field("best", description="Trial checkpoints kept on disk afterwards.")
    promotion: PromotionGates = Field(default_factory=PromotionGates, description="Gates for `vocadapt promote`.")
    _folder: Path = PrivateAttr(default_factory=Path.cwd)

    def base_tree(self) -> dict[str, Any]:
        """The base experiment as a mapping, with the sweep's ``overrides`` applied."""
        if isinstance(self.base, dict):
            tree = copy.deepcopy(self.base)
        else:
            path = Path(self.base) if Path(self.base).is_absolute() else self._folder / self.base
            if not path.is_file():
                raise ConfigError(f"sweep base {self.base!r} does not exist (looked for {path}); give a path "
                                  f"relative to the sweep file or an inline mapping")
            tree = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for assignment in self.overrides:
            apply_override(tree, assignment)
        return tree

    def storage(self) -> StorageLocation:
        """``storage_path`` as a location (a relative folder is resolved against the current folder)."""
        return locate(self.storage_path, field="sweep storage_path")

    def trials_folder(self, base: ExperimentConfig) -> Path:
        """The local folder for the trials' own files (models, tokenizers): under the sweep's storage when that is
        a local folder, else under the base experiment's ``output_dir``; always on disk, where adapt writes."""
        local = self.storage().local
        return (local / self.name if local is not None else Path(base.output_dir).resolve() / self.name) / "trials"


def set_trial_value(tree: dict[str, Any], dotted: str, value: Any) -> None:
    """Set one search-space field of an experiment tree; ``init.methods`` given one method name becomes a one-item
    list. An unknown field is refused with the nearest valid name."""
    if dotted == SINGLE_METHOD_FIELD and isinstance(value, str):
        value = [value]
    set_dotted(tree, dotted, value, ExperimentConfig, where="search_space.")


def trial_experiment(base_tree: dict[str, Any], assignments: dict[str, Any]) -> ExperimentConfig:
    """The experiment config of one trial: the base with the trial's values set, validated.

    A trial that chooses its methods (``init.methods`` in the search space) keeps only those methods' options: a
    sweep over ``init.methods: [fvt, omp]`` with an ``init.options.omp.k`` axis gives its fvt trials no omp options,
    which the adapt pipeline would refuse as options of a method the run does not use."""
    tree = copy.deepcopy(base_tree)
    for dotted, value in assignments.items():
        set_trial_value(tree, dotted, value)
    if SINGLE_METHOD_FIELD in assignments and isinstance(tree.get("init", {}).get("options"), dict):
        chosen = set(tree["init"].get("methods") or [])
        tree["init"]["options"] = {name: value for name, value in tree["init"]["options"].items() if name in chosen}
    return ExperimentConfig.model_validate(tree)


def validate_sweep(sweep: SweepConfig) -> list[dict[str, Any]]:
    """Validate every value of every dimension against the experiment schema, before any trial starts.

    Returns the grid's combinations (each dict is one trial's grid assignments). Raises ConfigError naming the
    dimension, the value and the problem.
    """
    base = sweep.base_tree()
    try:
        ExperimentConfig.model_validate(base)
    except ValidationError as error:
        problems = "\n  ".join(validation_problems(error))
        raise ConfigError(f"sweep {sweep.name}: the base experiment is invalid:\n  {problems}") from error
    for dotted, dimension in sweep.search_space.items():
        for value in dimension.values_to_check():
            try:
                trial_experiment(base, {dotted: value})
            except ValidationError as error:
                problem = "; ".join(validation_problems(error))
                raise ConfigError(
                    f"search_space.{dotted}: value {value!r} does not make a valid experiment ({problem}); "
                    f"fix the value or the field name (see `vocadapt config --schema`)"
                ) from error
    grids = {k: d.grid for k, d in sweep.search_space.items() if d.kind == "grid"}
    return [dict(zip(grids, combo)) for combo in itertools.product(*grids.values())]


def load_sweep_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> SweepConfig:
    """Read a sweep YAML, apply dotted overrides to the sweep's own fields, validate it and every trial value."""
    path = Path(path)
    tree = read_yaml_mapping(path, "sweep config", "configs/sweeps/italian-smollm2.yaml")
    for assignment in overrides:
        apply_override(tree, assignment, SweepConfig)
    try:
        sweep = SweepConfig.model_validate(tree)
    except ValidationError as error:
        lines = [f"invalid sweep config {path}:", *(f"  {line}" for line in validation_problems(error))]
        raise ConfigError("\n".join(lines)) from error
    sweep._folder = path.resolve().parent
    validate_sweep(sweep)
    return sweep


# ------------------------------------------------------------------------------------------------ Ray Tune glue


def param_space(sweep: SweepConfig) -> dict[str, Any]:
    """The search space as Ray Tune samplers, keyed by dotted field."""
    from ray import tune

    samplers = {"grid": tune.grid_search, "choice": tune.choice, "uniform": lambda r: tune.uniform(*r),
                "loguniform": lambda r: tune.loguniform(*r), "randint": lambda r: tune.randint(*r)}
    return {dotted: samplers[d.kind](list(getattr(d, d.kind))) for dotted, d in sweep.search_space.items()}


@dataclass
class TrialOutcome:
    """What an objective returns: the run holding the trained model, its metrics, where its files are."""

    metrics: dict[str, float]
    model_run_id: str | None = None
    model_dir: str | None = None
    method: str | None = None
    lineage: dict[str, str] = field(default_factory=dict)


@dataclass
class TrialContext:
    """Given to an objective inside a Tune trial."""

    tracker: Any  # platform.tracking.Tracker on the sweep's experiment
    trial_run_id: str
    trial_id: str
    # Intermediate results (must include METRIC); each call is one ASHA step. The final result is the returned
    # TrialOutcome, reported by the trial itself. The scheduler may stop the trial inside any call.
    report: Callable[[dict[str, float]], None]
    # The sweep's shared artefacts folder (ArtefactCache): source bits per byte, tokenizers, helpers.
    cache_dir: str | None = None


Objective = Callable[[ExperimentConfig, TrialContext], TrialOutcome]


@dataclass(frozen=True)
class TrialSpec:
    """Everything a trial needs, shipped to the Ray worker once (``tune.with_parameters``)."""

    sweep_name: str
    sweep_run_id: str
    tracking_uri: str
    experiment: str
    base_tree: dict[str, Any]
    output_dir: str  # the sweep's folder in its storage (a path or URI): the artefact cache is under it
    objective: Objective
    trials_dir: str | None = None  # a local folder for the trials' files; default: <output_dir>/trials


def run_trial(params: dict[str, Any], spec: TrialSpec) -> None:
    """The Tune trainable: one trial = one child run of the sweep's run, ended FINISHED or FAILED here (a trial
    stopped by the scheduler is re-marked KILLED by the driver)."""
    from ray import tune

    from vocadapt.platform.tracking import Tracker

    os.environ.pop("MLFLOW_RUN_ID", None)  # `mlflow run` sets it in the driver; it must not steer this trial
    context = tune.get_context()
    trial_id = context.get_trial_id()
    tracker = Tracker(spec.tracking_uri, spec.experiment)
    tags = {"vocadapt.sweep.name": spec.sweep_name, "vocadapt.sweep.run_id": spec.sweep_run_id,
            "vocadapt.sweep.trial_id": trial_id, "vocadapt.sweep.params": json.dumps(params, sort_keys=True)}
    with tracker.run(f"{spec.sweep_name}/{trial_id}", parent_run_id=spec.sweep_run_id, tags=tags) as run:
        run_id = run.info.run_id
        outcome = _run_objective(params, spec, tracker, run_id, trial_id)
    # The run is ended before the last report: at it the scheduler may stop the trial, which never returns here.
    tune.report({**outcome.metrics, "mlflow_run_id": run_id, "model_run_id": outcome.model_run_id or "",
                 "model_dir": outcome.model_dir or "", "method": outcome.method or "",
                 "lineage": json.dumps(outcome.lineage), "final": True})


def _run_objective(params, spec: TrialSpec, tracker, run_id: str, trial_id: str) -> TrialOutcome:
    from ray import tune

    log_config_params(tracker, run_id, params)
    tree = copy.deepcopy(spec.base_tree)
    set_dotted(tree, "name", f"{spec.sweep_name}-{trial_id}")
    set_dotted(tree, "output_dir", spec.trials_dir or str(Path(spec.output_dir) / "trials"))
    set_dotted(tree, "tracking.tracking_uri", spec.tracking_uri)
    set_dotted(tree, "tracking.experiment", spec.experiment)
    set_dotted(tree, "tracking.register_best", False)  # the sweep registers its best trial, once
    config = trial_experiment(tree, params)
    steps = itertools.count(1)

    def report(metrics: dict[str, float]) -> None:
        tracker.log_metrics(run_id, {k: v for k, v in metrics.items() if isinstance(v, (int, float))}, next(steps))
        # A trial the scheduler stops exits inside this call (SystemExit: its run ends FAILED, or stays RUNNING
        # if the actor is killed first); the driver re-marks it KILLED from the results (end_runs_below).
        tune.report({**metrics, "mlflow_run_id": run_id})

    cache_dir = (locate(spec.output_dir) / CACHE_FOLDER).uri
    outcome = spec.objective(config, TrialContext(tracker, run_id, trial_id, report, cache_dir))
    tracker.log_metrics(run_id, outcome.metrics, next(steps))
    tracker.set_tags(run_id, {"vocadapt.sweep.model_run_id": outcome.model_run_id or "",
                              "vocadapt.method": outcome.method or ""})
    tracker.log_dict(run_id, config.model_dump(mode="json"), "config.json")
    return outcome


def end_runs_below(tracker, root_id: str, *, statuses: tuple[str, ...] = ("RUNNING",),
                   include_root: bool = False) -> None:
    """End as KILLED every run under ``root_id`` (and the root itself if asked) whose status is in ``statuses``.

    Trials stopped by the scheduler exit inside their last report (runs FAILED or left RUNNING), and a driver
    that died leaves its trials' runs RUNNING: they are recorded as KILLED, tagged ``vocadapt.sweep.stopped_early``.
    """
    client = tracker.client
    pending = [client.get_run(root_id)] if include_root else []
    frontier = [root_id]
    while frontier:
        run_id = frontier.pop()
        children = client.search_runs([tracker.experiment_id], f"tags.mlflow.parentRunId = '{run_id}'")
        pending += children
        frontier += [child.info.run_id for child in children]
    for run in pending:
        if run.info.status in statuses:
            client.set_tag(run.info.run_id, "vocadapt.sweep.stopped_early", "true")
            client.set_terminated(run.info.run_id, status="KILLED")


def loggable(values: dict[str, Any]) -> dict[str, str]:
    """Config values as MLflow params or tags: URI credentials stripped, but not masked by key.

    ``tracking.redact`` masks every key containing "token", which hides ``tokenizer.vocab_size`` (a swept field);
    experiment configs hold no secret fields, so only the values' URI credentials need removing.
    """
    from vocadapt.platform.tracking import redact_value

    return {key: str(redact_value(value if isinstance(value, str) else json.dumps(value)))[:6000]
            for key, value in values.items()}


def log_config_params(tracker, run_id: str, values: dict[str, Any]) -> None:
    from mlflow.entities import Param

    tracker.client.log_batch(run_id, params=[Param(k, v) for k, v in loggable(values).items()])


def fit(sweep: SweepConfig, spec: TrialSpec, *, resume: bool, retry_failed: bool):
    """Run (or resume) the Tune experiment; returns its ResultGrid. Trials that fail are recorded, not raised."""
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler

    trainable = tune.with_resources(
        tune.with_parameters(run_trial, spec=spec),
        {"cpu": sweep.budget.cpus_per_trial, "gpu": sweep.budget.gpus_per_trial},
    )
    storage = sweep.storage()
    if resume:
        where = (storage / sweep.name).ray_storage()
        tuner = tune.Tuner.restore(where["storage_path"], trainable, resume_unfinished=True,
                                   restart_errored=retry_failed, storage_filesystem=where.get("storage_filesystem"))
        return tuner.fit()
    if sweep.scheduler.kind == "asha":
        scheduler = ASHAScheduler(time_attr="training_iteration", max_t=sweep.scheduler.max_t,
                                  grace_period=sweep.scheduler.grace_period,
                                  reduction_factor=sweep.scheduler.reduction_factor)
    else:
        scheduler = FIFOScheduler()
    tuner = tune.Tuner(
        trainable,
        param_space=param_space(sweep),
        tune_config=tune.TuneConfig(
            metric=METRIC, mode="min", scheduler=scheduler, num_samples=sweep.budget.num_samples,
            max_concurrent_trials=sweep.budget.max_concurrent_trials, time_budget_s=sweep.budget.time_budget_s,
        ),
        run_config=tune.RunConfig(
            name=sweep.name, failure_config=tune.FailureConfig(max_failures=0), verbose=1, **storage.ray_storage(),
        ),
    )
    return tuner.fit()


def can_resume(sweep: SweepConfig) -> bool:
    from ray import tune

    where = (sweep.storage() / sweep.name).ray_storage()
    return tune.Tuner.can_restore(where["storage_path"], storage_filesystem=where.get("storage_filesystem"))


def read_state(sweep: SweepConfig) -> dict[str, Any]:
    path = sweep.storage() / sweep.name / STATE_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def write_state(sweep: SweepConfig, state: dict[str, Any]) -> None:
    folder = sweep.storage() / sweep.name
    folder.mkdir()
    (folder / STATE_FILE).write_text(json.dumps(state, indent=2))
