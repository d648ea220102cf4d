"""What the dashboard shows, read from MLflow into pandas frames; no Streamlit here, so it is tested directly.

Runs are recognised by what they logged, never by their names: an *adapt* run has ``fertility.*`` metrics or the
``vocadapt.best_method`` tag; a *method* run has the ``method`` param and a parent; an *evaluation* run has the
``vocadapt.suite`` tag; a *matrix* run has the ``vocadapt.matrix`` tag (``vocadapt languages``) and its children
are *language* runs, one row of the language matrix each.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from vocadapt.platform.evaluation.harness import NOT_SCORES

FERTILITY = re.compile(r"^fertility\.(?P<tokenizer>[^.]+)\.(?P<language>[^.]+)\.(?P<measure>[^.]+)$")
RATES = ("tokens_per_second", "characters_per_second", "examples_per_second", "percent_generated_new", "chrf")
# per-step keys of runs logged before LAPT's metrics had their ``lapt_`` prefix
LEGACY_CURVES = ("train_loss", "loss", "lr", "tokens_per_second")


@dataclass
class ExperimentRuns:
    """Every run of one experiment, as a frame with one row per run and the MLflow client that read them."""

    client: Any
    frame: pd.DataFrame  # run_id, name, kind, method, parent_run_id, status, start_time, label, metrics, tags, params

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
            "metrics": dict(metrics), "tags": dict(tags), "params": dict(params),
        })
    columns = ["run_id", "name", "kind", "method", "parent_run_id", "status", "start_time", "label", "metrics", "tags",
               "params"]
    frame = _unique_labels(pd.DataFrame(rows, columns=columns))
    # a matrix's children log fertility.* too: what makes them language rows is their parent, not their metrics
    matrices = set(frame.loc[frame["kind"] == "matrix", "run_id"])
    frame.loc[frame["parent_run_id"].isin(matrices), "kind"] = "language"
    return ExperimentRuns(client, frame)


def _unique_labels(frame: pd.DataFrame) -> pd.DataFrame:
    """Labels name runs in selections, tables and plots, so they must differ: a run that did not finish says so,
    and runs sharing a name (the same config run twice) get their start time, then their id."""
    unfinished = frame["status"] != "FINISHED"
    status = " (" + frame.loc[unfinished, "status"].str.lower() + ")"
    frame.loc[unfinished, "label"] = frame.loc[unfinished, "label"] + status
    for suffix in (lambda row: row.start_time.strftime("%Y-%m-%d %H:%M:%S"), lambda row: row.run_id[:8]):
        repeated = frame["label"].duplicated(keep=False)
        if not repeated.any():
            break
        frame.loc[repeated, "label"] = [f"{row.label} @ {suffix(row)}" for row in frame[repeated].itertuples()]
    return frame


def _kind(tags: dict, params: dict, metrics: dict) -> str:
    if "vocadapt.leaderboard" in tags and "mlflow.parentRunId" not in tags:
        return "leaderboard"
    if "vocadapt.suite" in tags:
        return "evaluation"
    if "vocadapt.matrix" in tags and "mlflow.parentRunId" not in tags:
        return "matrix"
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


BPB_STAGES = {"source": "source model", "zero_shot": "step 0", "after_lapt": "after LAPT"}


def bits_per_byte_table(methods: pd.DataFrame, parents: pd.DataFrame) -> pd.DataFrame:
    """One row per method run and per source model: bits per byte at step 0 and after LAPT, per stream.

    ``stream`` names the held-out text by its language (``it (target)``, ``de (target_de)``, ``en (source)``) where
    the adapt run logged ``target.language`` (or ``target.languages``: one stream per target language) /
    ``target.source_language``; ``stage`` is one of :data:`BPB_STAGES`' values.
    """
    streams = {run.run_id: _stream_names(run.params) for run in parents.itertuples()}
    rows = []
    for run in parents.itertuples():
        for stream, name in streams[run.run_id].items():
            value = run.metrics.get(f"source_model.bpb_{stream}")
            if value is not None:
                rows.append({"model": f"source model ({run.label})", "stream": name,
                             "stage": BPB_STAGES["source"], "bpb": value})
    for run in methods.itertuples():
        names = streams.get(run.parent_run_id) or _stream_names({})
        for stream, name in names.items():
            for stage in ("zero_shot", "after_lapt"):
                value = run.metrics.get(f"bpb_{stream}_{stage}")
                if value is not None:
                    rows.append({"model": run.label, "stream": name, "stage": BPB_STAGES[stage], "bpb": value})
    return pd.DataFrame(rows, columns=["model", "stream", "stage", "bpb"])


def target_languages(params: dict) -> list[str]:
    """The target languages an adapt run logged: ``target.languages`` (several, logged as a list's text) or
    ``target.language``; [] when neither was logged."""
    several = params.get("target.languages")
    if several:
        return re.findall(r"[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]+)?", str(several))
    return [params["target.language"]] if params.get("target.language") else []


def _stream_names(params: dict) -> dict[str, str]:
    """{stream: label}: ``target`` (the first target language), ``target_<code>`` for each further one, ``source``."""
    languages = target_languages(params)
    names = {"target": f"{languages[0]} (target)" if languages else "target language"}
    names |= {f"target_{code.lower()}": f"{code} (target)" for code in languages[1:]}
    source = params.get("target.source_language")
    return names | {"source": f"{source} (source)" if source else "source language"}


LANGUAGE_MEASURES = {  # column: metric key, {code} the language, {english} the source language, {stream} its stream
    "ood_bpb": "bpb_ood_{stream}",
    "tokens_per_character": "generation.{scope}tokens_per_character",
    "same_text_token_saving": "generation.{scope}same_text_token_saving",
    "percent_generated_new": "generation.{scope}percent_generated_new",
    "cloze_acc_bytes": "benchmark.side_by_side_cloze_{code}.acc_bytes",
    "translation_chrf": "benchmark.side_by_side_translation_{english}_{code}.chrf",
}
LANGUAGE_COLUMNS = ["model", "language", *LANGUAGE_MEASURES]


def language_scores_table(methods: pd.DataFrame, parents: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, target language) of the adapt runs: each language's out-of-domain bits per byte and its
    side-by-side generation and benchmark scores (``pipelines/side_by_side.py``; the first language's under the
    one-language names, a further one's under ``generation.<code>.*`` and ``bpb_ood_target_<code>``), for the
    source model (the parent's ``source_model.*``) and every method's final model."""
    rows = []

    def add(model: str, metrics: dict, prefix: str, params: dict) -> None:
        languages, english = target_languages(params), params.get("target.source_language") or "en"
        for position, code in enumerate(languages):
            names = {"code": code, "english": english, "stream": "target" if position == 0 else f"target_{code}",
                     "scope": "" if position == 0 else f"{code}."}
            scores = {column: metrics.get(prefix + key.format(**names)) for column, key in LANGUAGE_MEASURES.items()}
            if any(value is not None for value in scores.values()):
                rows.append({"model": model, "language": code, **scores})

    params = {run.run_id: run.params for run in parents.itertuples()}
    for run in parents.itertuples():
        add(f"source model ({run.label})", run.metrics, "source_model.", run.params)
    for run in methods.itertuples():
        add(run.label, run.metrics, "", params.get(run.parent_run_id, {}))
    return pd.DataFrame(rows, columns=LANGUAGE_COLUMNS)


def curve_keys(methods: pd.DataFrame) -> list[str]:
    """Metric keys that LAPT logs per step on the method runs (``lapt_loss``, ``lapt_learning_rate``, ...)."""
    from vocadapt.platform.lapt.worker import METRIC_PREFIX

    keys = {key for metrics in methods["metrics"] for key in metrics
            if key.startswith(METRIC_PREFIX) or key in LEGACY_CURVES}
    return sorted(keys)


def loss_curves(client, methods: pd.DataFrame, keys: Iterable[str] | None = None) -> pd.DataFrame:
    """Metric histories (step, value) of the method runs; only keys with more than one point make a curve."""
    keys = curve_keys(methods) if keys is None else list(keys)
    rows = []
    for run in methods.itertuples():
        for key in keys:
            if key not in run.metrics:
                continue
            for point in client.get_metric_history(run.run_id, key):
                rows.append({"run": run.label, "metric": key, "step": point.step, "value": point.value})
    frame = pd.DataFrame(rows, columns=["run", "metric", "step", "value"])
    points = frame.groupby("metric")["step"].nunique()
    return frame[frame["metric"].isin(points[points > 1].index)].reset_index(drop=True)


def benchmark_table(evaluations: pd.DataFrame) -> pd.DataFrame:
    """Models (evaluated and, where measured, their source models) x benchmark scores (no stderr columns)."""
    rows = {}
    for run in evaluations.itertuples():
        for prefix, label in (("", run.label), ("source_model.", f"source of {run.label}")):
            head = f"{prefix}benchmark."
            scores = {key[len(head):]: value for key, value in run.metrics.items()
                      if key.startswith(head) and not key.endswith("_stderr")
                      and key.rsplit(".", 1)[-1] not in NOT_SCORES}
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


ENERGY = re.compile(r"^energy\.(?P<stage>[^.]+)\.kwh$")
ENERGY_STAGES = ("tokenizer", "init", "lapt", "evaluation", "total")  # display order; others after these
ENERGY_COLUMNS = ["run", "kind", "stage", "kwh", "kg_co2eq", "country", "mode"]


def energy_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (run, stage) of the runs' ``energy.<stage>.kwh`` and ``emissions.<stage>.kg_co2eq``, with the
    grid's country and how the energy was measured (the ``vocadapt.energy_*`` tags). Stage ``total`` is the run's
    sum over its stages; an adapt run's stages include its method runs'."""
    order = {stage: position for position, stage in enumerate(ENERGY_STAGES)}
    rows = []
    for run in runs.itertuples():
        stages = sorted((match["stage"] for match in map(ENERGY.match, run.metrics) if match),
                        key=lambda stage: (order.get(stage, len(order)), stage))
        rows += [{"run": run.label, "kind": run.kind, "stage": stage, "kwh": run.metrics[f"energy.{stage}.kwh"],
                  "kg_co2eq": run.metrics.get(f"emissions.{stage}.kg_co2eq"),
                  "country": run.tags.get("vocadapt.energy_country", ""),
                  "mode": run.tags.get("vocadapt.energy_mode", "")} for stage in stages]
    return pd.DataFrame(rows, columns=ENERGY_COLUMNS)


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


EXPECTATION_COLUMNS = ["run", "corpus", "language", "expectation", "measure", "observed", "threshold", "success"]


def expectation_runs(everything: ExperimentRuns, adapt: pd.DataFrame) -> pd.DataFrame:
    """Runs whose corpus expectation results to show: the chosen adapt runs, and the top-level runs of other kinds
    (a sweep's run, a language matrix) that logged the suite's ``corpus.expectations_evaluated``."""
    frame = everything.frame
    logged = frame["metrics"].map(lambda metrics: "corpus.expectations_evaluated" in metrics)
    others = frame[logged & (frame["kind"] != "adapt") & (frame["parent_run_id"] == "")]
    return pd.concat([adapt[adapt["run_id"].isin(frame.loc[logged, "run_id"])], others])


def expectation_table(client, runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (run, corpus, expectation) from the runs' ``corpus_checks/expectations.json``: what the
    expectation measures, the value observed, the bound and whether it was met."""
    from vocadapt.platform.data.corpus_checks import EXPECTATIONS_ARTIFACT

    rows = []
    for run in runs.itertuples():
        if "corpus.expectations_evaluated" not in run.metrics:
            continue
        try:
            path = client.download_artifacts(run.run_id, EXPECTATIONS_ARTIFACT)
        except Exception:  # noqa: BLE001 - an artifact store that cannot be read shows as "no results"
            continue
        with open(path, encoding="utf-8") as handle:
            records = json.load(handle)["expectations"]
        rows += [{"run": run.label, **{key: record.get(key) for key in EXPECTATION_COLUMNS[1:]}} for record in records]
    return pd.DataFrame(rows, columns=EXPECTATION_COLUMNS)


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


MATRIX_TOKENIZERS = ("source", "target", "expanded")
MATRIX_FERTILITY = ("tokens_per_character", "tokens_per_word", "parity", "tokens_per_byte", "tokens_per_paragraph")
MATRIX_BPB = ("source", "fvt", "random")
MATRIX_SPEED_UP = {"generation.speed_up.characters_per_second": "measured (characters/s)",
                   "generation.speed_up.equal_content": "equal content (tokens/s x src/tgt tokens)"}


def language_matrix_table(languages: pd.DataFrame, matrices: pd.DataFrame) -> pd.DataFrame:
    """One row per language run of the chosen matrix runs, as ``vocadapt languages`` logged it (metrics and tags).

    ``row`` names the row in plots: the language, with its matrix run's name when two matrices measured it.
    A measure a row did not log (tokens per word where words are not delimited) is NaN.
    """
    parents = dict(zip(matrices["run_id"], matrices["label"]))
    rows = []
    for run in languages[languages["parent_run_id"].isin(list(parents))].itertuples():
        metrics, tags = run.metrics, run.tags
        row = {"language": tags.get("vocadapt.target_language") or run.name.rsplit("/", 1)[-1],
               "script": tags.get("vocadapt.script", ""), "segmentation": tags.get("vocadapt.segmentation", ""),
               "matrix": parents[run.parent_run_id],
               "train_lines": metrics.get("corpus.train_lines"),
               "dropped_language_id": metrics.get("corpus.dropped_language_id")}
        for measure in MATRIX_FERTILITY:
            for tokenizer in MATRIX_TOKENIZERS:
                row[f"{measure}.{tokenizer}"] = metrics.get(f"fertility.{tokenizer}.{measure}")
        row |= {f"bpb.{model}": metrics.get(f"bpb.{model}") for model in MATRIX_BPB}
        row["source_over_target_tokens"] = metrics.get("generation.source_over_target_tokens")
        row |= {key.removeprefix("generation."): metrics.get(key) for key in MATRIX_SPEED_UP}
        rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    repeated = table["language"].duplicated(keep=False)
    table.insert(0, "row", table["language"].where(~repeated, table["language"] + " (" + table["matrix"] + ")"))
    return table.astype({c: float for c in table.columns if c not in
                         ("row", "language", "script", "segmentation", "matrix")})


def language_matrix_long(table: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The matrix reshaped for plots: ``fertility`` (row, tokenizer, measure, value), ``bpb`` (row, model, bpb),
    ``speed_up`` (row, measure, speed_up); rows without a value are left out."""
    fertility = [{"row": r["row"], "script": r["script"], "tokenizer": tokenizer, "measure": measure,
                  "value": r[f"{measure}.{tokenizer}"]}
                 for _, r in table.iterrows() for measure in MATRIX_FERTILITY for tokenizer in MATRIX_TOKENIZERS]
    bpb = [{"row": r["row"], "model": model, "bpb": r[f"bpb.{model}"]} for _, r in table.iterrows()
           for model in MATRIX_BPB]
    speed = [{"row": r["row"], "measure": label, "speed_up": r[key.removeprefix("generation.")]}
             for _, r in table.iterrows() for key, label in MATRIX_SPEED_UP.items()]
    return {name: pd.DataFrame(rows).dropna() for name, rows in
            (("fertility", fertility), ("bpb", bpb), ("speed_up", speed))}


def experiments_with_matrix(client) -> list[str]:
    """Names of the experiments holding a language matrix run (``vocadapt languages``)."""
    experiments = client.search_experiments()
    if not experiments:
        return []
    found = client.search_runs([e.experiment_id for e in experiments], "tags.`vocadapt.matrix` LIKE '%'",
                               max_results=1000)
    ids = {run.info.experiment_id for run in found}
    return sorted(e.name for e in experiments if e.experiment_id in ids)


LEADERBOARD = re.compile(r"^leaderboard\.(?P<method>.+)\.(?P<measure>rank|bpb_target(?:_[a-z0-9_]+)?|bpb_source|"
                         r"init_seconds)$")


def leaderboard_table(leaderboards: pd.DataFrame) -> pd.DataFrame:
    """One row per (leaderboard run, method) from the parent's ``leaderboard.<method>.<measure>`` metrics, ranked;
    the source model (its own tokenizer) as a reference row with no rank. With several target languages, one
    ``bpb_target_<code>`` column per further language beside ``bpb_target`` (the first)."""
    rows = []
    further: set[str] = set()
    for run in leaderboards.itertuples():
        methods: dict[str, dict] = {}
        for key, value in run.metrics.items():
            match = LEADERBOARD.match(key)
            if match:
                methods.setdefault(match["method"], {})[match["measure"]] = value
                if match["measure"].startswith("bpb_target_"):
                    further.add(match["measure"])
        for method, measures in methods.items():
            rows.append({"run": run.label, "method": method, **measures})
        if "source_model.bpb_target" in run.metrics:
            reference = {f"bpb_{key.removeprefix('source_model.bpb_')}": value for key, value in run.metrics.items()
                         if key.startswith("source_model.bpb_target") or key == "source_model.bpb_source"}
            rows.append({"run": run.label, "method": "source model (own tokenizer)", **reference})
    columns = ["run", "rank", "method", "bpb_target", *sorted(further), "bpb_source", "init_seconds"]
    table = pd.DataFrame(rows, columns=columns)
    return table.sort_values(["run", "rank"], na_position="last", kind="stable").reset_index(drop=True)
