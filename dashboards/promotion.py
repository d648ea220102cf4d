"""What an ``adapt`` run measured beside its source model, and how its registered version fares at the promotion
gates; read from MLflow into pandas frames, no Streamlit here, so it is tested directly.

``adapt`` logs the source model's figures on the parent run (``source_model.*``, fertility of both tokenizers, the
parent's ``gates/items.json``) and each method's on its child run (the side-by-side benchmark, out-of-domain and
held-out bits per byte, parameter counts, its own ``gates/items.json``). The gates are decided here exactly as
``vocadapt promote`` decides them (``platform/registry/model_versions.py``: the version's recorded gates, the run's metrics with
its parent's, the per-item parts behind each paired-bootstrap interval), without moving any alias.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import pandas as pd

SOURCE = "source model"
# (metric family prefix, what the column shows); a key matches when it starts with the prefix
SIDE_BY_SIDE_PREFIXES = ("benchmark.side_by_side_", "generation.", "bpb_ood_", "parameters.")
HELD_OUT = {"target": ("bpb_target_after_lapt", "bpb_target_zero_shot"),
            "source": ("bpb_source_after_lapt", "bpb_source_zero_shot")}
SIDE_BY_SIDE_COLUMNS = ["run", "model", "measure", "value", "source", "difference"]


def measure_name(key: str) -> str:
    """A metric key as a column title: ``benchmark.side_by_side_cloze_it.acc_bytes`` -> ``cloze_it acc_bytes``."""
    key = key.removeprefix("benchmark.side_by_side_").removeprefix("generation.")
    return key.replace(".", " ")


def side_by_side_rows(parent_metrics: Mapping[str, float], method_metrics: Mapping[str, Mapping[str, float]],
                      run: str = "") -> pd.DataFrame:
    """One row per (model, measure): every side-by-side figure a method run logged, the source model's value of
    the same measure (``source_model.<key>`` on the parent run) and the difference method - source; the source
    model's own rows (``model`` = ``source model``) too. Held-out bits per byte are the method's after LAPT
    (else step 0) against the parent's ``source_model.bpb_<stream>``."""
    rows = []
    keys = sorted({key.removeprefix("source_model.") for key in parent_metrics
                   if key.startswith("source_model.") and key.removeprefix("source_model.").startswith(
                       SIDE_BY_SIDE_PREFIXES)}
                  | {key for metrics in method_metrics.values() for key in metrics
                     if key.startswith(SIDE_BY_SIDE_PREFIXES)})
    for key in keys:
        source = parent_metrics.get(f"source_model.{key}")
        if source is not None:
            rows.append({"run": run, "model": SOURCE, "measure": measure_name(key), "value": source,
                         "source": source, "difference": 0.0})
        for method, metrics in method_metrics.items():
            if key in metrics:
                rows.append({"run": run, "model": method, "measure": measure_name(key), "value": metrics[key],
                             "source": source, "difference": None if source is None else metrics[key] - source})
    for stream, keys_in_order in HELD_OUT.items():
        source = parent_metrics.get(f"source_model.bpb_{stream}")
        measure = f"held-out bpb {stream}"
        if source is not None:
            rows.append({"run": run, "model": SOURCE, "measure": measure, "value": source, "source": source,
                         "difference": 0.0})
        for method, metrics in method_metrics.items():
            key = next((k for k in keys_in_order if k in metrics), None)
            if key is not None:
                rows.append({"run": run, "model": method, "measure": measure, "value": metrics[key],
                             "source": source, "difference": None if source is None else metrics[key] - source})
    return pd.DataFrame(rows, columns=SIDE_BY_SIDE_COLUMNS)


def side_by_side_table(adapt: pd.DataFrame, methods: pd.DataFrame) -> pd.DataFrame:
    """:func:`side_by_side_rows` for every chosen adapt run (frames of ``runs.load_runs``), with the run's label."""
    frames = []
    for run in adapt.itertuples():
        children = methods[methods["parent_run_id"] == run.run_id]
        rows = side_by_side_rows(run.metrics, {child.method or child.label: child.metrics
                                               for child in children.itertuples()}, run.label)
        frames.append(rows)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=SIDE_BY_SIDE_COLUMNS)


def wide(table: pd.DataFrame) -> pd.DataFrame:
    """The side-by-side rows as a table: one row per measure, one column per run and model (``run: model``), each
    run's source model first."""
    if table.empty:
        return pd.DataFrame()
    table = table.assign(column=table["run"] + ": " + table["model"])
    order = sorted(dict.fromkeys(zip(table["run"], table["model"], table["column"])),
                   key=lambda key: (key[0], key[1] != SOURCE))
    pivot = table.pivot_table(index="measure", columns="column", values="value", sort=False)
    return pivot.reindex(columns=[column for _, _, column in order])


GATE_COLUMNS = ["gate", "measured", "source", "difference", "margin", "bound", "low", "high", "verdict", "detail"]


def gate_frame(results) -> pd.DataFrame:
    """Gate results (``platform.gates.GateResult``) as rows: measured and source values, candidate - source with
    its 95% interval (low, high), the margin as stated and the bound it becomes, the verdict."""
    rows = [{"gate": r.gate, "measured": r.measured, "source": r.reference, "difference": r.difference,
             "margin": r.margin, "bound": r.bound, "low": r.interval.low if r.interval else None,
             "high": r.interval.high if r.interval else None, "verdict": r.verdict, "detail": r.detail}
            for r in results]
    return pd.DataFrame(rows, columns=GATE_COLUMNS)


def version_gates(client, name: str, version: int) -> tuple[pd.DataFrame, str]:
    """The gates of ``name`` version ``version`` decided as ``vocadapt promote`` decides them (nothing moves);
    with where the gates came from, in words."""
    from vocadapt.platform.registry.gate_items import collect_gate_items
    from vocadapt.platform.registry.gates import evaluate_gates, gated_languages
    from vocadapt.platform.registry.model_versions import collect_metrics, recorded_gates

    model_version = client.get_model_version(name, str(version))
    gates, origin = recorded_gates(model_version)
    language = gated_languages(model_version.tags)  # one gate per target language where the gate is per language
    results = evaluate_gates(collect_metrics(client, model_version.run_id), gates, language,
                             collect_gate_items(client, model_version.run_id))
    return gate_frame(results), origin


HISTORY_COLUMNS = ["model", "alias", "version", "event", "at", "by", "decision", "detail"]


def alias_events(name: str, model_tags: Mapping[str, str], aliases: Mapping[str, str],
                 version_tags: Mapping[int, Mapping[str, str]]) -> pd.DataFrame:
    """The aliases' story from what ``platform/registry/model_versions.py`` records: each promotion decision on a version
    (``vocadapt.promotion.<alias>.*``: accepted or refused, when, by whom, the previous version), each rollback
    (``vocadapt.rollback.<alias>``, and ``...restored_at`` on the version it went back to), and where each alias
    points now with its history (``vocadapt.alias_history.<alias>`` on the registered model); oldest first, the
    current state last."""
    rows = []
    for version, tags in version_tags.items():
        for key, value in tags.items():
            parts = key.split(".")
            if key.startswith("vocadapt.promotion.") and key.endswith(".decision") and len(parts) == 4:
                alias = parts[2]
                prefix = f"vocadapt.promotion.{alias}"
                previous = tags.get(f"{prefix}.previous")
                rows.append({"alias": alias, "version": version, "event": "promotion", "at": tags.get(f"{prefix}.at", ""),
                             "by": tags.get(f"{prefix}.by", ""), "decision": value,
                             "detail": "; ".join(part for part in (
                                 f"from version {previous}" if previous else "",
                                 f"gates: {tags[f'{prefix}.gates_from']}" if tags.get(f"{prefix}.gates_from") else "")
                                 if part)})
                if f"{prefix}.restored_at" in tags:
                    rows.append({"alias": alias, "version": version, "event": "restored by rollback",
                                 "at": tags[f"{prefix}.restored_at"], "by": "", "decision": "", "detail": ""})
            elif key.startswith("vocadapt.rollback.") and len(parts) == 3:
                record = json.loads(value)
                rows.append({"alias": parts[2], "version": version, "event": "rolled back", "at": record.get("at", ""),
                             "by": record.get("by", ""), "decision": "",
                             "detail": f"to version {record.get('to')}"})
    order = {"promotion": 0, "rolled back": 1, "restored by rollback": 2}  # a rollback writes both at once
    rows.sort(key=lambda row: (row["at"], order[row["event"]], row["version"]))
    for key, value in sorted(model_tags.items()):
        if key.startswith("vocadapt.alias_history."):
            alias = key.removeprefix("vocadapt.alias_history.")
            rows.append({"alias": alias, "version": int(aliases[alias]) if alias in aliases else None,
                         "event": "now", "at": "", "by": "", "decision": "",
                         "detail": "history " + " -> ".join(str(v) for v in json.loads(value))})
    for alias, version in sorted(aliases.items()):
        if f"vocadapt.alias_history.{alias}" not in model_tags:
            rows.append({"alias": alias, "version": int(version), "event": "now", "at": "", "by": "", "decision": "",
                         "detail": "set at registration or by hand"})
    return pd.DataFrame([{"model": name, **row} for row in rows], columns=HISTORY_COLUMNS)


def alias_history_table(client, name: str) -> pd.DataFrame:
    """:func:`alias_events` of registered model ``name``, read from the registry."""
    model = client.get_registered_model(name)
    versions = {int(v.version): dict(v.tags) for v in client.search_model_versions(f"name='{name}'")}
    return alias_events(name, dict(model.tags or {}), {a: str(v) for a, v in (model.aliases or {}).items()}, versions)
