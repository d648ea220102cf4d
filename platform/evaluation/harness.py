"""lm-evaluation-harness glue: score an in-memory model on named tasks and flatten the results for MLflow.

lm-eval has no MLflow logger; :func:`flatten_results` turns its nested results into ``<task>.<metric>`` floats
(``acc``, ``acc_bytes``, ``chrf``, with ``_stderr`` companions), dropping its filter suffix (``acc,none`` ->
``acc``). Runs offline: ``HF_HUB_OFFLINE`` and ``HF_DATASETS_OFFLINE`` are set before lm-eval is imported.

Log-likelihood tasks are scored in memory (lm-eval's ``HFLM``). Generative tasks (``output_type: generate_until``)
go to a vLLM OpenAI-compatible server when one is offered (:class:`ServedGeneration`): lm-eval's
``local-completions`` model posts to ``<server>/v1/completions`` with the model's own tokenizer, greedily.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
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


def generative_tasks(names: Sequence[str], manager) -> list[str]:
    """The names among ``names`` that are tasks generating text (``output_type: generate_until``).

    Read from each task's YAML (includes resolved, functions not imported); groups and tags count as not
    generative, so a group's tasks are always scored in memory.
    """
    from lm_eval.tasks._index import Kind
    from lm_eval.tasks._yaml_loader import load_yaml

    found = []
    for name in names:
        entry = manager.task_index.get(name)
        if entry is None or entry.kind is not Kind.TASK:
            continue
        config = load_yaml(entry.yaml_path, resolve_func=False) if entry.yaml_path else (entry.cfg or {})
        if config.get("output_type") == "generate_until":
            found.append(name)
    return found


class ServedGeneration:
    """A vLLM server for one model folder, started on first use and kept for every later call; ``close()`` stops it.

    ``endpoint()`` returns ``(base_url, served model name)``.
    """

    def __init__(self, model_dir: Path, *, max_model_len: int, log_file: Path | None = None) -> None:
        self.model_dir, self.max_model_len, self.log_file = Path(model_dir), max_model_len, log_file
        self.server = None

    def endpoint(self) -> tuple[str, str]:
        if self.server is None:
            from vocadapt.platform.evaluation.serving import VllmServer

            server = VllmServer(self.model_dir, max_model_len=self.max_model_len, log_file=self.log_file)
            self.server = server.__enter__()
        return self.server.base_url, self.server.model_name

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


def completions_model(base_url: str, model_name: str, tokenizer_dir: Path, *, batch_size: int, max_length: int,
                      seed: int):
    """lm-eval's ``local-completions`` model for a vLLM server: requests as token ids of the model's tokenizer."""
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    try:
        return LocalCompletionsAPI(
            base_url=f"{base_url}/v1/completions", model=model_name, tokenizer=str(tokenizer_dir),
            tokenizer_backend="huggingface", batch_size=batch_size, max_length=max_length, seed=seed,
            max_retries=1, timeout=600,
        )
    except ModuleNotFoundError as error:  # lm-eval's API models need its [api] extra (tenacity, aiohttp)
        from vocadapt.components.errors import UserError

        raise UserError(f"generation through vLLM needs lm-eval's API extra ({error}): "
                        "pip install 'lm-eval[api]==0.4.13', or use generation.backend=transformers") from error


@dataclass(frozen=True)
class HarnessSettings:
    """How lm-eval runs the tasks: the folder of our own task YAMLs (``include_path``) and whether lm-eval's
    built-in tasks are indexed too, the batch and the longest sequence, at most ``limit`` items per task, the
    few-shot examples (None: each task's default) and the seed of every draw."""

    include_path: Path | None = None
    include_defaults: bool = False
    batch_size: int = 8
    max_length: int = 512
    limit: int | None = None
    num_fewshot: int | None = None
    seed: int = 0


def run_harness(
    model,
    tokenizer,
    tasks: Sequence[str],
    settings: HarnessSettings = HarnessSettings(),
    *,
    served: ServedGeneration | None = None,
) -> dict[str, Any]:
    """Score ``model`` (a transformers causal LM in memory) on ``tasks``; returns lm-eval's results dict.

    With ``served``, the generative tasks are generated by that server (the same weights, saved in its folder)
    and their results merged with the in-memory ones.
    """
    offline_environment()
    from lm_eval.models.huggingface import HFLM

    batch_size, max_length, seed = settings.batch_size, settings.max_length, settings.seed
    limit, num_fewshot = settings.limit, settings.num_fewshot
    manager = task_manager(settings.include_path, include_defaults=settings.include_defaults)
    missing = unresolved_tasks(tasks, manager)
    if missing:
        raise ValueError(f"lm-eval does not know the tasks {missing}: check the suite's task names "
                         "(`lm_eval ls tasks`) or the include path")
    options = dict(task_manager=manager, limit=limit, num_fewshot=num_fewshot, seed=seed)
    remote = generative_tasks(tasks, manager) if served is not None else []
    local = [task for task in tasks if task not in remote]
    results: dict[str, Any] = {}
    if local:
        lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size, max_length=max_length)
        results = _merge(results, _evaluate(lm, local, **options))
    if remote:
        base_url, name = served.endpoint()
        lm = completions_model(base_url, name, served.model_dir, batch_size=batch_size, max_length=max_length,
                               seed=seed)
        results = _merge(results, _evaluate(lm, remote, **options))
    return results


def _evaluate(lm, tasks: list[str], *, task_manager, limit, num_fewshot, seed) -> dict[str, Any]:
    from lm_eval import simple_evaluate

    return simple_evaluate(
        model=lm, tasks=list(tasks), task_manager=task_manager, limit=limit, num_fewshot=num_fewshot,
        random_seed=seed, numpy_random_seed=seed, torch_random_seed=seed, fewshot_random_seed=seed,
        log_samples=False, bootstrap_iters=0,
    )


def _merge(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Two lm-eval results dicts as one: their per-task tables (results, versions, configs...) side by side."""
    merged = dict(first)
    for key, value in second.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged.setdefault(key, value)
    return merged


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
