"""lm-evaluation-harness glue: score an in-memory model on named tasks and flatten the results for MLflow.

lm-eval has no MLflow logger; :func:`flatten_results` turns its nested results into ``<task>.<metric>`` floats
(``acc``, ``acc_bytes``, ``chrf``, with ``_stderr`` companions), dropping its filter suffix (``acc,none`` ->
``acc``). Runs offline: ``HF_HUB_OFFLINE`` and ``HF_DATASETS_OFFLINE`` are set before lm-eval is imported.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any


# Numbers lm-eval reports next to the scores that are not scores (the promotion gates and the dashboard's "best
# per column" treat every benchmark.* metric as higher-is-better).
NOT_SCORES = {"sample_len", "sample_count"}


def offline_environment() -> None:
    """Never touch the hub from an evaluation: local task data only."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


def task_manager(include_path: Path | None = None, *, include_defaults: bool = True):
    """An lm-eval TaskManager; ``include_defaults=False`` skips indexing lm-eval's ~15k tasks (tens of seconds)."""
    offline_environment()
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=str(include_path) if include_path else None, include_defaults=include_defaults)


def unresolved_tasks(names: Sequence[str], manager) -> list[str]:
    """The names the TaskManager does not know (tasks, groups or tags)."""
    known = set(manager.all_tasks)
    return [name for name in names if name not in known]


def run_harness(
    model,
    tokenizer,
    tasks: Sequence[str],
    *,
    include_path: Path | None = None,
    include_defaults: bool = False,
    batch_size: int = 8,
    max_length: int = 512,
    limit: int | None = None,
    num_fewshot: int | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Score ``model`` (a transformers causal LM in memory) on ``tasks``; returns lm-eval's results dict."""
    offline_environment()
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM

    manager = task_manager(include_path, include_defaults=include_defaults)
    missing = unresolved_tasks(tasks, manager)
    if missing:
        raise ValueError(f"lm-eval does not know the tasks {missing}: check the suite's task names "
                         "(`lm_eval ls tasks`) or the include path")
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size, max_length=max_length)
    return simple_evaluate(
        model=lm, tasks=list(tasks), task_manager=manager, limit=limit, num_fewshot=num_fewshot,
        random_seed=seed, numpy_random_seed=seed, torch_random_seed=seed, fewshot_random_seed=seed,
        log_samples=False, bootstrap_iters=0,
    )


def flatten_results(results: dict[str, Any]) -> dict[str, float]:
    """``{"<task>.<metric>": value}`` for every finite numeric score (``acc,none`` -> ``acc``)."""
    flat = {}
    for task, metrics in results.get("results", {}).items():
        for key, value in metrics.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                continue
            metric = key.split(",", 1)[0]
            if metric in NOT_SCORES:
                continue
            flat[f"{task}.{metric}"] = float(value)
    return flat


def task_versions(results: dict[str, Any]) -> dict[str, str]:
    """``{"<task>": version}`` from lm-eval's results, for run tags."""
    return {task: str(version) for task, version in results.get("versions", {}).items()}
