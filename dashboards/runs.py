"""What the dashboard shows, read from MLflow into pandas frames; no Streamlit here, so it is tested directly.

Runs are recognised by what they logged, never by their names: an *adapt* run has ``fertility.*`` metrics or the
``vocadapt.best_method`` tag; a *method* run has the ``method`` param and a parent; an *evaluation* run has the
``vocadapt.suite`` tag.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

FERTILITY = re.compile(r"^fertility\.(?P<tokenizer>[^.]+)\.(?P<language>[^.]+)\.(?P<measure>[^.]+)$")
RATES = ("tokens_per_second", "characters_per_second", "examples_per_second", "percent_generated_new", "chrf")
CURVES = ("train_loss", "loss", "lr", "tokens_per_second")


@dataclass
class ExperimentRuns:
    """Every run of one experiment, as a frame with one row per run and the MLflow client that read them."""

    client: Any
    frame: pd.DataFrame  # run_id, name, kind, method, parent_run_id, status, start_time, label, metrics, tags

    def of_kind(self, kind: str, run_ids: Iterable[str] | None = None) -> pd.DataFrame:
        rows = self.frame[self.frame["kind"] == kind]
        if run_ids is not None:
            rows = rows[rows["run_id"].isin(list(run_ids))]
        return rows


def client_for(tracking_uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)


def experiment_names(client) -> list[str]:
    return sorted(e.name for e in client.search_experiments())


def load_runs(client, experiment_name: str) -> ExperimentRuns:
    experiment = client.get_experiment_by_name(experiment_name)
    if experiment is None:
        raise KeyError(f"no experiment {experiment_name!r}")
    rows = []
    for run in client.search_runs([experiment.experiment_id], max_results=5000, order_by=["attributes.start_time ASC"]):
        tags, params, metrics = run.data.tags, run.data.params, run.data.metrics
        kind = _kind(tags, params, metrics)
        name = run.info.run_name or run.info.run_id[:8]
        method = params.get("method") or tags.get("vocadapt.method") or ""
        rows.append({
            "run_id": run.info.run_id, "name": name, "kind": kind, "method": method,
            "parent_run_id": tags.get("mlflow.parentRunId", ""), "status": run.info.status,
            "start_time": pd.to_datetime(run.info.start_time, unit="ms"),
            "label": f"{name}" if not method or method in name else f"{name} [{method}]",
            "metrics": dict(metrics), "tags": dict(tags),
        })
    columns = ["run_id", "name", "kind", "method", "parent_run_id", "status", "start_time", "label", "metrics", "tags"]
    return ExperimentRuns(client, pd.DataFrame(rows, columns=columns))


def _kind(tags: dict, params: dict, metrics: dict) -> str:
    if "vocadapt.suite" in tags:
        return "evaluation"
    if "method" in params and "mlflow.parentRunId" in tags:
        return "method"
    if "vocadapt.best_method" in tags or any(key.startswith("fertility.") for key in metrics):
        return "adapt"
    return "other"


def fertility_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (run, tokenizer, language, measure) of the adapt runs' ``fertility.*`` metrics."""
    rows = []
    for run in runs.itertuples():
        for key, value in run.metrics.items():
            match = FERTILITY.match(key)
            if match:
                rows.append({"run": run.label, **match.groupdict(), "value": value})
    return pd.DataFrame(rows, columns=["run", "tokenizer", "language", "measure", "value"])


def bits_per_byte_table(methods: pd.DataFrame, parents: pd.DataFrame) -> pd.DataFrame:
    """One row per method run and per source model: bits per byte at step 0 and after LAPT, per stream."""
    rows = []
    for run in parents.itertuples():
        for stream in ("target", "source"):
            value = run.metrics.get(f"source_model.bpb_{stream}")
            if value is not None:
                rows.append({"model": f"source model ({run.name})", "stream": stream, "stage": "source", "bpb": value})
    for run in methods.itertuples():
        for stream in ("target", "source"):
            for stage in ("zero_shot", "after_lapt"):
                value = run.metrics.get(f"bpb_{stream}_{stage}")
                if value is not None:
                    rows.append({"model": run.label, "stream": stream, "stage": stage, "bpb": value})
    return pd.DataFrame(rows, columns=["model", "stream", "stage", "bpb"])


def loss_curves(client, methods: pd.DataFrame, keys: Iterable[str] = CURVES) -> pd.DataFrame:
    """Metric histories (step, value) of the method runs, for every curve key they logged."""
    rows = []
    for run in methods.itertuples():
        for key in keys:
            for point in client.get_metric_history(run.run_id, key):
                rows.append({"run": run.label, "metric": key, "step": point.step, "value": point.value})
    return pd.DataFrame(rows, columns=["run", "metric", "step", "value"])


def benchmark_table(evaluations: pd.DataFrame) -> pd.DataFrame:
    """Models (evaluated and, where measured, their source models) x benchmark scores (no stderr columns)."""
    rows = {}
    for run in evaluations.itertuples():
        for prefix, label in (("", run.label), ("source_model.", f"source of {run.label}")):
            head = f"{prefix}benchmark."
            scores = {key[len(head):]: value for key, value in run.metrics.items()
                      if key.startswith(head) and not key.endswith("_stderr")}
            if scores:
                rows[label] = scores
    return pd.DataFrame.from_dict(rows, orient="index").sort_index(axis=1)


def best_per_column(table: pd.DataFrame) -> dict[str, str]:
    """Column -> the row with the highest score (every benchmark metric logged is higher-is-better)."""
    return {column: str(table[column].idxmax()) for column in table.columns if table[column].notna().any()}


def throughput_table(evaluations: pd.DataFrame) -> pd.DataFrame:
    """One row per (run, model, task): generation rates, %Gen, chrF; and speed-ups per run."""
    rows = []
    pattern = re.compile(r"^(?P<prefix>source_model\.)?generation\.(?P<task>[^.]+)\.(?P<rate>[^.]+)$")
    for run in evaluations.itertuples():
        grouped: dict[tuple[str, str], dict[str, float]] = {}
        for key, value in run.metrics.items():
            match = pattern.match(key)
            if match and match["rate"] in RATES:
                model = "source model" if match["prefix"] else "adapted"
                grouped.setdefault((model, match["task"]), {})[match["rate"]] = value
        for (model, task), rates in sorted(grouped.items()):
            speed = run.metrics.get(f"speed_up.{task}.characters_per_second") if model == "adapted" else 1.0
            rows.append({"run": run.label, "model": model, "task": task, **rates, "speed_up_chars": speed})
    return pd.DataFrame(rows)


def parameter_table(evaluations: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for run in evaluations.itertuples():
        for prefix, label in (("", run.label), ("source_model.", f"source of {run.label}")):
            counts = {key.removeprefix(f"{prefix}parameters."): value for key, value in run.metrics.items()
                      if key.startswith(f"{prefix}parameters.")}
            if counts:
                rows.append({"model": label, **{k: int(v) for k, v in counts.items()}})
    return pd.DataFrame(rows)


def similarity_tables(client, evaluations: pd.DataFrame) -> dict[str, dict]:
    """run label -> the ``similarity/similarity.json`` artifact (names, matrix, anchors) of runs that logged one."""
    found = {}
    for run in evaluations.itertuples():
        if not any(key.startswith("similarity.") for key in run.metrics):
            continue
        try:
            path = client.download_artifacts(run.run_id, "similarity/similarity.json")
        except Exception:  # noqa: BLE001 - an artifact store that cannot be read shows as "no heat map"
            continue
        with open(path, encoding="utf-8") as handle:
            found[run.label] = json.load(handle)
    return found


def similarity_long(table: dict) -> pd.DataFrame:
    names = table["names"]
    return pd.DataFrame([{"a": a, "b": b, "similarity": table["matrix"][i][j]}
                         for i, a in enumerate(names) for j, b in enumerate(names)])


def registered_models(client) -> pd.DataFrame:
    """One row per model version: name, version, aliases, run, and its ``vocadapt.*`` lineage tags."""
    rows = []
    for model in client.search_registered_models():
        aliases_by_version: dict[str, list[str]] = {}
        for alias, version in (model.aliases or {}).items():
            aliases_by_version.setdefault(str(version), []).append(alias)
        for version in client.search_model_versions(f"name='{model.name}'"):
            lineage = {key.removeprefix("vocadapt."): value for key, value in version.tags.items()
                       if key.startswith("vocadapt.")}
            rows.append({"model": model.name, "version": int(version.version),
                         "aliases": ", ".join(sorted(aliases_by_version.get(str(version.version), []))),
                         "run_id": version.run_id, **lineage})
    frame = pd.DataFrame(rows)
    return frame.sort_values(["model", "version"], ascending=[True, False]) if not frame.empty else frame
