"""The ``sweep`` pipeline: Ray Tune over a search space of adapt configs, ASHA on held-out target bits per byte, one
MLflow parent run for the sweep with one child run per trial, a leaderboard, and the best trial registered.

Reads top to bottom: setup (validate every trial value, create the experiment and the parent run in the driver),
run (Tune), report (close what Tune left open, leaderboard, best configuration, registry). A failed trial is
recorded as failed and the others go on; ``resume=True`` continues an interrupted sweep under the same parent run.
Trials share what their values do not change (the source model's bits per byte, a trained tokenizer, a fastText
helper) through ``<storage_path>/<name>/cache``; each trial's run is tagged ``vocadapt.cache.<kind>``: computed or
reused.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from vocadapt.components.errors import UserError
from vocadapt.platform.config import ExperimentConfig
from vocadapt.platform.sweeps.tune import (
    METRIC, OUT_OF_DOMAIN_METRIC, Objective, SweepConfig, TrialContext, TrialOutcome, TrialSpec, can_resume,
    end_runs_below, fit, log_config_params, loggable, read_state, trial_experiment, validate_sweep, write_state,
)
from vocadapt.platform.sweeps.cache import ArtefactCache
from vocadapt.platform.tracking import Tracker, git_commit, resolve_tracking_uri

FINISHED, FAILED, STOPPED, INTERRUPTED = "FINISHED", "FAILED", "STOPPED", "INTERRUPTED"


@dataclass
class SweepResult:
    parent_run_id: str
    tracking_uri: str
    rows: list[dict[str, Any]]
    best: dict[str, Any] | None
    registered: tuple[str, int] | None = None
    counts: dict[str, int] = field(default_factory=dict)
    unstarted: int = 0  # trials of the search space that Tune had not created when it stopped

    @property
    def interrupted(self) -> bool:
        """Tune was stopped (Ctrl-C) before every trial ended: resume it with ``resume=True``."""
        return self.unstarted > 0 or any(row["status"] == INTERRUPTED for row in self.rows)


def run_sweep(
    sweep: SweepConfig, console: Console | None = None, *, objective: Objective | None = None,
    resume: bool = False, retry_failed: bool = True,
) -> SweepResult:
    console = console or Console()
    # ---- setup: every trial value is checked before Ray starts; the experiment is created here, not in trials
    validate_sweep(sweep)
    if objective is None:
        check_methods(sweep)
    base_tree = sweep.base_tree()
    base = ExperimentConfig.model_validate(base_tree)
    if objective is None:  # the adapt objective's trials run LAPT: its worker groups must fit beside the trials
        check_sweep_resources(sweep)
    # the adapt objective's trials read the base config's corpora: checked here once, before any run or folder
    checked = _check_corpora(base, console) if objective is None else None
    os.environ.pop("MLFLOW_RUN_ID", None)  # set by `mlflow run`; it would leak into every Ray worker
    tracker = Tracker(resolve_tracking_uri(base.tracking.tracking_uri), base.tracking.experiment)
    parent_id = _open_parent_run(sweep, tracker, resume)
    if checked is not None:
        _record_corpus_checks(sweep, base, tracker, parent_id, *checked)
    spec = TrialSpec(sweep.name, parent_id, tracker.tracking_uri, base.tracking.experiment, base_tree,
                     (sweep.storage() / sweep.name).uri, objective or adapt_objective,
                     trials_dir=str(sweep.trials_folder(base)))

    # ---- run
    console.rule(f"[bold]sweep {sweep.name}")
    started_ray = _ensure_ray()
    started = time.monotonic()
    try:
        grid = fit(sweep, spec, resume=resume, retry_failed=retry_failed)
    except KeyboardInterrupt:
        tracker.client.set_terminated(parent_id, status="KILLED")
        from vocadapt.platform.tracking import KILLED_RUNS

        KILLED_RUNS.append((sweep.name, parent_id))
        raise
    except BaseException:
        tracker.client.set_terminated(parent_id, status="FAILED")
        raise
    finally:
        if started_ray:
            import ray

            ray.shutdown()

    # ---- report
    budget = sweep.budget.time_budget_s
    if budget and time.monotonic() - started >= budget:  # the time budget ended it: a complete sweep, as budgeted
        rows, unstarted = leaderboard(grid), 0
    else:
        rows = leaderboard(grid, saved_trial_statuses(sweep))
        unstarted = expected_trials(sweep) - len(rows)
    for row in rows:
        if row["status"] == STOPPED and row["mlflow_run_id"]:
            end_runs_below(tracker, row["mlflow_run_id"], statuses=("RUNNING", "FAILED"), include_root=True)
    end_runs_below(tracker, parent_id)
    best = next((row for row in rows if row["status"] == FINISHED), None)
    counts = {status: sum(r["status"] == status for r in rows)
              for status in (FINISHED, FAILED, STOPPED, INTERRUPTED)}
    _log_leaderboard(tracker, parent_id, rows, best, counts, base_tree)
    result = SweepResult(parent_id, tracker.tracking_uri, rows, best, None, counts, max(unstarted, 0))
    if result.interrupted:  # a partial sweep registers nothing and deletes nothing; --resume continues it
        tracker.client.set_terminated(parent_id, status="KILLED")
        _print_leaderboard(rows, None, console)
        return result
    if best and sweep.register_best and best.get("model_dir"):
        result.registered = _register_best(sweep, base, tracker, parent_id, best)
    if sweep.keep_models == "best":
        _drop_other_models(rows, best)
    tracker.client.set_terminated(parent_id, status="FINISHED")
    _print_leaderboard(rows, result.registered, console)
    return result


def check_methods(sweep: SweepConfig) -> None:
    """Every initialiser a trial could use is registered, with its options and helper, before any trial starts:
    each candidate trial's methods go through the adapt pipeline's one resolver."""
    from vocadapt.pipelines.preflight import resolve_methods
    from vocadapt.platform.sweeps.tune import SINGLE_METHOD_FIELD, trial_experiment

    base_tree = sweep.base_tree()
    dimension = sweep.search_space.get(SINGLE_METHOD_FIELD)
    for value in dimension.values_to_check() if dimension else [None]:
        trial = trial_experiment(base_tree, {SINGLE_METHOD_FIELD: value} if dimension else {})
        try:
            resolve_methods(trial)
        except UserError as error:
            where = f"search_space.{SINGLE_METHOD_FIELD}" if dimension else "the base experiment"
            raise UserError(f"{where}: {error}") from error


def check_sweep_resources(sweep: SweepConfig) -> None:
    """Refuse, before Ray starts, a sweep whose trials could wait for ever on this machine's cluster: a trial holds
    ``budget.cpus_per_trial`` (and GPUs) and its LAPT on Ray then starts a worker group that asks for more
    (``platform/lapt/resources.py``: ``sweep_deadlock``). Every value of the search space's ``lapt.*`` dimensions is
    considered. A cluster named by RAY_ADDRESS may grow, so it is not checked here."""
    import ray

    from vocadapt.platform.lapt.resources import sweep_deadlock, trial_lapt_workers, visible_gpus
    from vocadapt.platform.sweeps.tune import trial_experiment

    if os.environ.get("RAY_ADDRESS") and not ray.is_initialized():
        return
    base_tree = sweep.base_tree()
    trials = [trial_experiment(base_tree, {})] + [
        trial_experiment(base_tree, {dotted: value}) for dotted, dimension in sweep.search_space.items()
        if dotted.startswith("lapt.") for value in dimension.values_to_check()]
    workers = {name: max(trial_lapt_workers(trial.lapt)[name] for trial in trials) for name in ("CPU", "GPU")}
    held = {"CPU": sweep.budget.cpus_per_trial, "GPU": sweep.budget.gpus_per_trial}
    if ray.is_initialized():
        available, where = ray.cluster_resources(), "the Ray cluster this process is connected to"
    else:  # what _ensure_ray starts: every CPU of this machine, the GPUs torch sees
        available = {"CPU": float(os.cpu_count() or 2), "GPU": float(visible_gpus())}
        where = "the local Ray cluster on this machine"
    problems = sweep_deadlock(held, workers, sweep.budget.max_concurrent_trials, available)
    if not problems:
        return
    fits = [k for k in range(1, sweep.budget.max_concurrent_trials)
            if not sweep_deadlock(held, workers, k, available)]
    fix = (f"budget.max_concurrent_trials: {fits[-1]}" if fits else
           "fewer CPUs or GPUs per trial (budget.cpus_per_trial, budget.gpus_per_trial) or LAPT workers "
           "(lapt.num_workers, lapt.cpus_per_worker)")
    raise UserError(f"sweep {sweep.name!r}: its trials could wait for ever on {where} ({'; '.join(problems)}); "
                    f"set {fix}, or lapt.runner: in_process in the base (LAPT on the trial's own CPUs)")


def _check_corpora(base: ExperimentConfig, console: Console) -> tuple[Any, dict[str, Any]]:
    """The base config's inputs and its corpus expectation results; raises (naming the file or expectation and the
    fix) on a bad corpus, so a sweep of bad data stops before its parent run exists."""
    from vocadapt.pipelines.preflight import check_corpora
    from vocadapt.platform.assets.sources import resolve_inputs

    inputs = resolve_inputs(base)
    return inputs, check_corpora(base, inputs, console)


def _record_corpus_checks(sweep: SweepConfig, base: ExperimentConfig, tracker: Tracker, parent_id: str, inputs,
                          expectations: dict[str, Any]) -> None:
    """Log the expectation results on the sweep's run and put them in the trials' cache, where every trial on the
    same corpora and bounds reuses them (a trial whose values change the corpus section validates its own)."""
    from vocadapt.platform.data.corpus_checks import log_expectations
    from vocadapt.platform.sweeps.cache import CACHE_FOLDER

    log_expectations(tracker, parent_id, expectations)
    cache = ArtefactCache((sweep.storage() / sweep.name / CACHE_FOLDER).uri)
    cache.corpus_expectations(base, inputs, lambda: expectations)


def _open_parent_run(sweep: SweepConfig, tracker: Tracker, resume: bool) -> str:
    exists = can_resume(sweep)
    if exists and not resume:
        raise UserError(f"sweep {sweep.name!r} already has state in {sweep.storage() / sweep.name}; pass --resume "
                        f"to continue it, or change `name` or `storage_path` to start a new one")
    if resume:
        parent_id = read_state(sweep).get("parent_run_id")
        if not exists or not parent_id:
            raise UserError(f"no sweep {sweep.name!r} to resume in {sweep.storage()}; run it without --resume")
        tracker.client.update_run(parent_id, status="RUNNING")
        end_runs_below(tracker, parent_id)  # trials of the interrupted driver, restarted by Tune
        return parent_id
    tags = {"vocadapt.sweep.name": sweep.name, "vocadapt.git_commit": git_commit()}
    run = tracker.client.create_run(tracker.experiment_id, run_name=sweep.name, tags=tags)
    parent_id = run.info.run_id
    log_config_params(tracker, parent_id, {f"search_space.{k}": v.model_dump(exclude_none=True)
                                           for k, v in sweep.search_space.items()})
    tracker.log_dict(parent_id, sweep.model_dump(mode="json"), "sweep.json")
    write_state(sweep, {"parent_run_id": parent_id, "tracking_uri": tracker.tracking_uri})
    return parent_id


def _ensure_ray() -> bool:
    """Connect to $RAY_ADDRESS, else start a local cluster; True when this call started it."""
    import ray

    if ray.is_initialized():
        return False
    if os.environ.get("RAY_ADDRESS"):
        ray.init()
    else:
        ray.init(num_cpus=os.cpu_count() or 2, include_dashboard=False)
    return True


def saved_trial_statuses(sweep: SweepConfig) -> dict[str, str]:
    """Each trial's status in the experiment state Tune saved when ``fit`` ended (what ``--resume`` restarts from).

    In memory Tune marks every trial it stops at the end TERMINATED, so a trial cut short by Ctrl-C would look
    like one ASHA stopped; the saved state still says RUNNING (or PENDING, PAUSED) for it.
    """
    from ray.tune import ExperimentAnalysis

    where = (sweep.storage() / sweep.name).ray_storage()  # a folder, or a path on an object store's filesystem
    analysis = ExperimentAnalysis(where["storage_path"], storage_filesystem=where.get("storage_filesystem"))
    return {str(trial.path): trial.status for trial in analysis.trials}


def expected_trials(sweep: SweepConfig) -> int:
    """Trials a complete sweep has: num_samples x the grids' product (samplers add no trials)."""
    count = sweep.budget.num_samples
    for dimension in sweep.search_space.values():
        count *= len(dimension.grid) if dimension.kind == "grid" else 1
    return count


def leaderboard(grid, statuses: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One row per trial, best first: finished trials by target bits per byte, then stopped, interrupted, failed.

    ``statuses``: Tune's saved status per trial folder (``saved_trial_statuses``); a trial that neither finished nor
    failed is STOPPED (by ASHA) when Tune ended it, INTERRUPTED when the sweep stopped first.
    """
    rows = []
    statuses = statuses or {}
    for result in grid:
        metrics = result.metrics or {}
        if result.error is not None:
            status = FAILED
        elif metrics.get("final"):
            status = FINISHED
        else:
            status = STOPPED if statuses.get(str(result.path), "TERMINATED") == "TERMINATED" else INTERRUPTED
        rows.append({
            "trial_id": metrics.get("trial_id") or Path(str(result.path)).name,
            "status": status,
            "params": dict(result.config or {}),
            METRIC: metrics.get(METRIC),
            OUT_OF_DOMAIN_METRIC: metrics.get(OUT_OF_DOMAIN_METRIC),
            "bpb_source": metrics.get("bpb_source"),
            "iterations": metrics.get("training_iteration", 0),
            "method": metrics.get("method") or None,
            "mlflow_run_id": metrics.get("mlflow_run_id"),
            "model_run_id": metrics.get("model_run_id") or None,
            "model_dir": metrics.get("model_dir") or None,
            "lineage": json.loads(metrics.get("lineage") or "{}"),
            "error": str(result.error).strip().splitlines()[-1][:300] if result.error is not None else None,
        })
    order = {FINISHED: 0, STOPPED: 1, INTERRUPTED: 2, FAILED: 3}
    # ties go to the lower trial id, so a resumed sweep ranks (and registers) the same best trial again
    key = ranking_metric(rows)
    return sorted(rows, key=lambda r: (order[r["status"]], r[key] if r[key] is not None else float("inf"),
                                       str(r["trial_id"])))


def ranking_metric(rows: list[dict[str, Any]]) -> str:
    """What the finished trials are ranked by: their out-of-domain target bits per byte (the text the default
    promotion gate reads) when every finished trial has one, else the held-out ``METRIC``, which comes from the
    training corpora and flatters a trial fitted to their domain."""
    finished = [row for row in rows if row["status"] == FINISHED]
    if finished and all(row.get(OUT_OF_DOMAIN_METRIC) is not None for row in finished):
        return OUT_OF_DOMAIN_METRIC
    return METRIC


def _log_leaderboard(tracker, parent_id, rows, best, counts, base_tree) -> None:
    public = [{k: v for k, v in row.items() if k not in ("lineage",)} for row in rows]
    tracker.log_dict(parent_id, {"metric": ranking_metric(rows), "mode": "min", "trials": public},
                     "leaderboard.json")
    tracker.log_text(parent_id, leaderboard_markdown(rows), "leaderboard.md")
    tracker.log_metrics(parent_id, {f"trials.{status.lower()}": n for status, n in counts.items()})
    if best is None:
        return
    best_config = trial_experiment(base_tree, best["params"]).model_dump(mode="json")
    tracker.log_text(parent_id, yaml.safe_dump(best_config, sort_keys=False), "best_config.yaml")
    # tags, not params: a resumed sweep may find another best, and params cannot change
    for key, value in loggable({f"vocadapt.sweep.best.{k}": v for k, v in best["params"].items()}).items():
        tracker.client.set_tag(parent_id, key, value)
    tracker.log_metrics(parent_id, {f"best.{key}": best[key] for key in (METRIC, OUT_OF_DOMAIN_METRIC, "bpb_source")
                                    if best.get(key) is not None})
    tracker.set_tags(parent_id, {"vocadapt.sweep.best_trial": best["trial_id"],
                                 "vocadapt.sweep.best_run_id": best["mlflow_run_id"] or ""})


_NOTES = {STOPPED: "stopped early by ASHA", INTERRUPTED: "interrupted: continue with --resume"}


def leaderboard_markdown(rows: list[dict[str, Any]]) -> str:
    keys = sorted({key for row in rows for key in row["params"]})
    lines = ["| rank | trial | status | " + " | ".join(keys)
             + f" | {METRIC} | {OUT_OF_DOMAIN_METRIC} | bpb_source | note |",
             "|" + " --- |" * (len(keys) + 7)]
    for rank, row in enumerate(rows, 1):
        values = [json.dumps(row["params"].get(k)) for k in keys]
        scores = " | ".join("-" if row.get(key) is None else f"{row[key]:.4f}"
                            for key in (METRIC, OUT_OF_DOMAIN_METRIC, "bpb_source"))
        note = row["error"] or _NOTES.get(row["status"], "")
        lines.append(f"| {rank} | {row['trial_id']} | {row['status']} | " + " | ".join(values)
                     + f" | {scores} | {note} |")
    return "\n".join(lines) + "\n"


def _register_best(sweep, base: ExperimentConfig, tracker, parent_id, best) -> tuple[str, int]:
    from vocadapt.platform.model_loading import registered_model_name
    from vocadapt.platform.registry.model_versions import VersionOptions, register_model

    name = sweep.registered_model or base.tracking.registered_model or registered_model_name(base)
    existing = _registered_version_of(tracker, name, parent_id, best["trial_id"])
    if existing is not None:  # a resumed sweep whose best trial did not change: register it once
        return name, existing
    lineage = {**best["lineage"], "vocadapt.sweep.name": sweep.name, "vocadapt.sweep.run_id": parent_id,
               "vocadapt.sweep.trial_id": best["trial_id"], "vocadapt.sweep.trial_run_id": best["mlflow_run_id"],
               "vocadapt.sweep.params": json.dumps(best["params"], sort_keys=True)}
    registered = register_model(tracker, best["model_run_id"], Path(best["model_dir"]), name, lineage=lineage,
                                options=VersionOptions(gates=sweep.promotion))  # `vocadapt promote` uses them
    tracker.set_tags(parent_id, {"vocadapt.registered": f"{name}/{registered.version}"})
    return name, registered.version


def _registered_version_of(tracker, name: str, sweep_run_id: str, trial_id: str) -> int | None:
    from mlflow.exceptions import MlflowException

    from vocadapt.platform.registry.model_versions import _registry_client

    try:
        versions = _registry_client(tracker.tracking_uri).search_model_versions(f"name = '{name}'")
    except MlflowException:
        return None
    for version in versions:
        if (version.tags.get("vocadapt.sweep.run_id"), version.tags.get("vocadapt.sweep.trial_id")) == (
                sweep_run_id, trial_id):
            return int(version.version)
    return None


def _drop_other_models(rows, best) -> None:
    """Keep only the best trial's checkpoint on disk; the others' numbers are in MLflow."""
    for row in rows:
        if row is not best and row.get("model_dir"):
            shutil.rmtree(row["model_dir"], ignore_errors=True)


def _print_leaderboard(rows, registered, console: Console) -> None:
    from rich.table import Table

    keys = sorted({key for row in rows for key in row["params"]})
    ranked_by = ranking_metric(rows)
    text = "out-of-domain" if ranked_by == OUT_OF_DOMAIN_METRIC else "held-out"
    table = Table(title=f"Sweep leaderboard: ranked by {text} target bits per byte ({ranked_by}, lower is better)")
    scored = (METRIC, OUT_OF_DOMAIN_METRIC)
    for column in ("rank", "trial", "status", *keys, *scored, "note"):
        table.add_column(column, justify="right" if column in ("rank", *scored) else "left")
    for rank, row in enumerate(rows, 1):
        scores = ("-" if row.get(key) is None else f"{row[key]:.4f}" for key in scored)
        note = row["error"] or _NOTES.get(row["status"], "")
        table.add_row(str(rank), row["trial_id"], row["status"], *(str(row["params"].get(k)) for k in keys), *scores,
                      note)
    console.print(table)
    if registered:
        console.print(f"registered the best trial as [bold]{registered[0]}[/] version {registered[1]} "
                      f"(alias candidate) with the sweep's promotion gates; promote it with `vocadapt promote "
                      f"{registered[0]} --version {registered[1]} --to champion`")


# ------------------------------------------------------------------------------------------ the adapt objective


def adapt_objective(config: ExperimentConfig, trial: TrialContext) -> TrialOutcome:
    """One trial = the adapt pipeline on the trial's config, its runs nested under the trial's run from the start.

    The zero-shot bits per byte are reported before LAPT (``on_metrics``), so ASHA can stop a bad initialisation
    before it trains; the final report (after LAPT) is the returned outcome.
    """
    from vocadapt.pipelines.adapt import run_adapt

    def record(kind: str, status: str, key: str) -> None:
        # logged as it happens (ASHA may end the trial early), through the client: Tracker.set_tags masks every
        # key containing "token", which would hide vocadapt.cache.tokenizer
        trial.tracker.client.set_tag(trial.trial_run_id, f"vocadapt.cache.{kind}", status)
        trial.tracker.client.set_tag(trial.trial_run_id, f"vocadapt.cache.{kind}_key", key)

    cache = ArtefactCache(trial.cache_dir, on_event=record) if trial.cache_dir else None  # a folder or a URI

    def report_zero_shot(method: str, zero_shot: dict[str, float]) -> None:
        trial.report({METRIC: zero_shot["target"], "bpb_source": zero_shot["source"]})

    result = run_adapt(config, Console(quiet=True), parent_run_id=trial.trial_run_id, on_metrics=report_zero_shot,
                       cache=cache)
    best = result.best
    bpb = best.bits_per_byte
    out_of_domain = best.out_of_domain_target_bpb()
    language = config.target.language
    metrics = {
        METRIC: best.held_out_target_bpb(),
        **({OUT_OF_DOMAIN_METRIC: out_of_domain} if out_of_domain is not None else {}),
        "bpb_source": bpb.get("source_after_lapt", bpb["source_zero_shot"]),
        **{f"bpb_{key}": value for key, value in bpb.items()},
        **{f"source_model.bpb_{key}": value for key, value in result.source_bits_per_byte.items()},
        "fertility.target_tokens_per_word": result.fertility[f"target_tokenizer.{language}"]["tokens_per_word"],
        "fertility.source_tokens_per_word": result.fertility[f"source_tokenizer.{language}"]["tokens_per_word"],
    }
    return TrialOutcome(metrics, best.run_id, str(best.model_dir), best.method,
                        _lineage(trial.tracker, result.parent_run_id, best))


def _lineage(tracker, adapt_run_id: str, best) -> dict[str, str]:
    from vocadapt.platform.tracking import sha256_files

    tags = tracker.client.get_run(adapt_run_id).data.tags
    lineage = {key: value for key, value in tags.items() if key.startswith("vocadapt.")}
    tokenizer_files = sorted(p for p in Path(best.model_dir).glob("*") if p.name.startswith(("tokenizer", "vocab",
                                                                                               "merges", "special")))
    if tokenizer_files and lineage.get("vocadapt.tokenizer_sha256", "***") == "***":
        lineage["vocadapt.tokenizer_sha256"] = sha256_files(tokenizer_files)
    lineage["vocadapt.method"] = best.method
    lineage["vocadapt.adapt_run_id"] = adapt_run_id
    return lineage
