"""The per-item parts behind the promotion gates' intervals, as an MLflow artifact: ``gates/items.json``.

``adapt`` logs the source model's parts on its parent run (names prefixed ``source_model.``, with the fertility
parts of both tokenizers) and each method's on its child run; ``promote`` reads both (the run's win) and
bootstraps each gate's interval from them (``platform/registry/gates.py``) without scoring anything again. The file holds,
per metric name, the kind, the parts (one row per document or item) and short ids of the items' text (sha1
prefixes, for the pairing check; the text itself is not logged):

    {"format": 1, "items": {"bpb_ood_target": {"kind": "ratio", "parts": [[bits, bytes], ...], "ids": [...]}}}
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path

from vocadapt.components.errors import UserError
from vocadapt.components.evaluation.bootstrap import ItemParts, parts_from_json, parts_to_json

ITEMS_FILE = "gates/items.json"
FORMAT = 1


def log_gate_items(tracker, run_id: str, items: Mapping[str, ItemParts]) -> None:
    """Write ``items`` as the run's ``gates/items.json`` (nothing when empty)."""
    if items:
        payload = {"format": FORMAT, "items": {key: parts_to_json(parts) for key, parts in sorted(items.items())}}
        tracker.log_text(run_id, json.dumps(payload, separators=(",", ":")), ITEMS_FILE)


def read_gate_items(client, run_id: str) -> dict[str, ItemParts]:
    """The run's ``gates/items.json`` ({} when the run has none: it predates them). A file of another format is
    refused, naming it."""
    listed = {entry.path for entry in client.list_artifacts(run_id, "gates")}
    if ITEMS_FILE not in listed:
        return {}
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(client.download_artifacts(run_id, ITEMS_FILE, scratch))
        payload = json.loads(path.read_text(encoding="utf-8"))
    if payload.get("format") != FORMAT:
        raise UserError(f"run {run_id}'s {ITEMS_FILE} has format {payload.get('format')!r}, this vocadapt reads "
                        f"format {FORMAT}; promote with the vocadapt that logged it, or with a --gates file setting "
                        "require_intervals: false (point estimates only)")
    return {key: parts_from_json(entry) for key, entry in payload["items"].items()}


def collect_gate_items(client, run_id: str) -> dict[str, ItemParts]:
    """The run's items, with its parent run's added where the run lacks them (as ``collect_metrics`` does)."""
    run = client.get_run(run_id)
    items = read_gate_items(client, run_id)
    parent_id = run.data.tags.get("mlflow.parentRunId")
    if parent_id:
        for key, parts in read_gate_items(client, parent_id).items():
            items.setdefault(key, parts)
    return items
