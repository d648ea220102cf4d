"""The model registry: registration with lineage, a file manifest and a model card; gated promotion; rollback.

A registered version is an MLflow 3 LoggedModel: a pyfunc carrying the safetensors checkpoint (``mlflow_model.py``),
so ``mlflow.pyfunc.load_model("models:/NAME@champion")`` and ``mlflow models serve`` work on it, and
``vocadapt serve`` serves the same checkpoint with vLLM. Nothing is registered that fails the serve check
(``serve_check.py``).

Only aliases move (``candidate``, ``champion``), never the deprecated stages. Every promotion decision, accepted or
refused, is written as tags on the model version, and the registered model keeps each alias's history in a tag, so
``rollback`` can move ``champion`` back to the version promoted before the current one.

A model's files are pinned at registration by ``vocadapt-manifest.json`` (sha256 per file); the manifest's own
sha256 goes into a version tag, so a served copy is checked against what was registered, not against itself.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from vocadapt.components.errors import UserError
from vocadapt.platform.registry.gates import (  # noqa: F401  (re-exported: the registry's public names)
    DEFAULT_BENCHMARK_MARGINS, GateResult, Margin, PromotionDecision, PromotionGates, evaluate_gates, gate_table,
    gated_languages,
)
from vocadapt.platform.tracking import redact_value

MANIFEST = "vocadapt-manifest.json"
MODEL_CARD = "model_card.md"
REQUIRED_LINEAGE = (
    "vocadapt.source_model", "vocadapt.tokenizer_sha256", "vocadapt.method", "vocadapt.corpus_sha256",
    "vocadapt.git_commit",
)
# A tokenizer is loadable from any one of these file sets (fast JSON, sentencepiece, GPT-2 BPE, WordPiece).
TOKENIZER_FILE_SETS = (("tokenizer.json",), ("tokenizer.model",), ("vocab.json", "merges.txt"), ("vocab.txt",))
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
_HISTORY_TAG = "vocadapt.alias_history.{alias}"
_HISTORY_KEEP = 200  # versions kept in an alias's history tag (tag values are capped at 5,000 characters)
# The gates a version was registered with (a sweep's `promotion:` section), as JSON: `promote` uses them when it is
# given none. Margins and flags only, never secrets; written like every other version tag.
GATES_TAG = "vocadapt.promotion_gates"


class ModelFilesError(UserError):
    """A model folder that must not be served: the message lists every problem found."""


# ---------------------------------------------------------------------------------------------------- manifest


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(model_dir: Path) -> str:
    """Write ``vocadapt-manifest.json`` (relative path -> sha256 of every file) into ``model_dir``.

    Returns the manifest's own sha256, to be stored as the version tag ``vocadapt.manifest_sha256``.
    """
    model_dir = Path(model_dir)
    files = {
        str(path.relative_to(model_dir)): _sha256(path)
        for path in sorted(p for p in model_dir.rglob("*") if p.is_file() and p.name != MANIFEST)
    }
    text = json.dumps({"format": 1, "files": files}, indent=1, sort_keys=True) + "\n"
    (model_dir / MANIFEST).write_text(text, encoding="utf-8")
    return hashlib.sha256(text.encode()).hexdigest()


def verify_model_files(model_dir: Path, expected_manifest_sha256: str | None = None) -> dict[str, str]:
    """Check a downloaded model before anything loads it; returns the manifest's files. Raises ModelFilesError.

    Checks: config, safetensors weights and a complete tokenizer are present; no pickled weights; the manifest
    exists, matches ``expected_manifest_sha256`` (from the registry) when given, lists every file, and every
    file's sha256 matches.
    """
    model_dir = Path(model_dir)
    problems = []
    if not (model_dir / "config.json").is_file():
        problems.append("config.json is missing")
    if not list(model_dir.glob("*.safetensors")):
        problems.append("no *.safetensors weights")
    if not (model_dir / "tokenizer_config.json").is_file():
        problems.append("tokenizer file tokenizer_config.json is missing")
    if not any(all((model_dir / name).is_file() for name in names) for names in TOKENIZER_FILE_SETS):
        problems.append("tokenizer files are missing (need tokenizer.json, tokenizer.model, vocab.json+merges.txt "
                        "or vocab.txt)")
    pickles = sorted(str(p.relative_to(model_dir)) for p in model_dir.rglob("*") if p.suffix in PICKLE_SUFFIXES)
    if pickles:
        problems.append(f"pickled files are not accepted: {pickles}")
    manifest_path = model_dir / MANIFEST
    files: dict[str, str] = {}
    if not manifest_path.is_file():
        problems.append(f"{MANIFEST} is missing (the model was not registered through vocadapt's registry)")
    else:
        raw = manifest_path.read_bytes()
        if expected_manifest_sha256 and hashlib.sha256(raw).hexdigest() != expected_manifest_sha256:
            problems.append(f"{MANIFEST} differs from the one recorded at registration")
        files = json.loads(raw)["files"]
        present = {str(p.relative_to(model_dir)) for p in model_dir.rglob("*") if p.is_file() and p.name != MANIFEST}
        for name in sorted(set(files) - present):
            problems.append(f"{name} is listed in the manifest but missing")
        for name in sorted(present - set(files)):
            problems.append(f"{name} is not listed in the manifest")
        for name in sorted(set(files) & present):
            if _sha256(model_dir / name) != files[name]:
                problems.append(f"{name} fails its sha256 check")
    if problems:
        raise ModelFilesError(
            f"model files in {model_dir} are refused:\n  - " + "\n  - ".join(problems)
            + "\nRe-register the model from its training output (vocadapt adapt / sweep), or download it again."
        )
    return files


# ---------------------------------------------------------------------------------------------- registration


@dataclass
class Registered:
    name: str
    version: int
    model_uri: str
    manifest_sha256: str
    logged_model_id: str = ""


SERVE_CHECK_FILE = "serve_check.json"


@dataclass(frozen=True)
class VersionOptions:
    """What a new version gets besides its checkpoint and lineage: the alias moved to it once it is complete (""
    moves none), the metrics its card shows and its LoggedModel links (None: the run's, with its parent's), the
    promotion gates recorded on it for ``promote``, and the vLLM environment the serve check runs (None: the
    default one)."""

    alias: str = "candidate"
    metrics: Mapping[str, float] | None = None
    gates: PromotionGates | None = None
    serving_venv: Path | None = None


def register_model(
    tracker, run_id: str, model_dir: Path, name: str, *, lineage: Mapping[str, Any],
    options: VersionOptions = VersionOptions(),
) -> Registered:
    """Register a saved checkpoint as a new version of ``name``: an MLflow 3 LoggedModel (a pyfunc that carries the
    checkpoint, ``platform/registry/mlflow_model.py``) with its metrics and corpus linked, lineage tags, a manifest and a
    model card.

    ``tracker`` is a ``platform.tracking.Tracker``; ``run_id`` the run that produced the model (its metrics and
    its parent run's are what the promotion gates read). First the serve check (``platform/serving/serve_check.py``): its
    report is logged on the run (``serve_check.json``, tag ``vocadapt.serve_check``) either way, and a model that
    fails it is not registered (NotServableError, naming each failed check). Then the manifest is written into
    ``model_dir`` and the checkpoint is logged once, inside the MLflow model. ``gates``, when given, are recorded on
    the version (tag ``vocadapt.promotion_gates``) for ``promote``.
    """
    from vocadapt.platform.serving.serve_check import check_servable, require

    alias, metrics, gates = options.alias, options.metrics, options.gates

    missing = [key for key in REQUIRED_LINEAGE if not lineage.get(key)]
    if missing:
        raise UserError(f"cannot register {name}: lineage tags {missing} are missing; pass them in `lineage`")
    check = check_servable(Path(model_dir), serving_venv=options.serving_venv)
    tracker.log_dict(run_id, check.as_dict(), SERVE_CHECK_FILE)
    tracker.set_tags(run_id, {"vocadapt.serve_check": "passed" if check.passed else "failed"})
    require(check, name)
    from vocadapt.platform.families.twins import twin_lineage, twin_record

    twin = twin_record(Path(model_dir))
    if twin is not None:  # random weights in a real family's shape: never described as the real model
        lineage = {**lineage, **twin_lineage(lineage.get("vocadapt.source_model", ""), twin)}
    manifest_sha = write_manifest(Path(model_dir))
    metrics = dict(metrics or collect_metrics(tracker.client, run_id))
    safe_lineage = {key: str(redact_value(str(value))) for key, value in lineage.items()}
    logged = _log_logged_model(tracker, run_id, Path(model_dir), safe_lineage, metrics)
    tags = {**lineage, "vocadapt.run_id": run_id, "vocadapt.manifest_sha256": manifest_sha,
            "vocadapt.model_card": f"runs:/{run_id}/{MODEL_CARD}", "vocadapt.logged_model_id": logged.model_id,
            "vocadapt.serve_check": check.summary()}
    if gates is not None:
        tags[GATES_TAG] = gates.model_dump_json(exclude_none=True)
    # The registry client is built here, on the tracker's URI: ``Tracker.client`` takes the process-wide registry
    # URI current when it was built, which may be another store's.
    registry = _registry_client(tracker.tracking_uri)
    version = _create_version(registry, name, logged.model_uri, run_id, tags, model_id=logged.model_id)
    if twin is not None:
        registry.update_model_version(name, str(version), description=tags["vocadapt.twin"])
    card = model_card(name, version, tags, metrics)
    tracker.log_text(run_id, card, MODEL_CARD)
    if alias:  # moved last: the alias never points at a version whose files, tags or card are still missing
        registry.set_registered_model_alias(name, alias, str(version))
    return Registered(name, version, logged.model_uri, manifest_sha, logged.model_id)


def _log_logged_model(tracker, run_id: str, model_dir: Path, lineage: Mapping[str, str],
                      metrics: Mapping[str, float]):
    """The checkpoint as a LoggedModel of ``run_id``, its metrics linked to the corpora it was adapted on."""
    from mlflow.data.code_dataset_source import CodeDatasetSource
    from mlflow.data.meta_dataset import MetaDataset

    from vocadapt.platform.registry.mlflow_model import log_checkpoint_model

    corpus = lineage.get("vocadapt.corpus_sha256", "")
    dataset = MetaDataset(CodeDatasetSource({"vocadapt.corpus_sha256": corpus}), name="corpora",
                          digest=corpus[:16]) if corpus else None
    # Each metric is linked to the model through the run that logged it: the parent's (source_model.*, fertility,
    # energy of the shared stages) through the parent, so the method's own run does not gain copies of them.
    run = tracker.client.get_run(run_id)
    parent_id = run.data.tags.get("mlflow.parentRunId")
    parent = tracker.client.get_run(parent_id).data.metrics if parent_id else {}
    from_parent = {key for key in metrics if key in parent and key not in run.data.metrics}
    by_run = {run_id: {key: value for key, value in metrics.items() if key not in from_parent}}
    if from_parent:
        by_run[parent_id] = {key: metrics[key] for key in sorted(from_parent)}
    return log_checkpoint_model(tracker.tracking_uri, run_id, model_dir, tags=dict(lineage), metrics=by_run,
                                dataset=dataset)


def _registry_client(uri: str):
    import mlflow

    return mlflow.tracking.MlflowClient(tracking_uri=uri, registry_uri=uri)


def _create_version(client, name: str, model_uri: str, run_id: str, tags: Mapping[str, Any],
                    model_id: str | None = None) -> int:
    """Create the version and tag it (the caller moves an alias to it once the rest is written).

    Lineage tags are checksums, names and commits, never secrets; they are written with only URI credentials
    stripped, because ``tracking.redact`` masks every key containing "token" (``vocadapt.tokenizer_sha256``).
    """
    from mlflow.exceptions import MlflowException

    try:
        client.create_registered_model(name)
    except MlflowException as error:
        if "RESOURCE_ALREADY_EXISTS" not in str(error.error_code):
            raise
    version = client.create_model_version(name, model_uri, run_id=run_id, model_id=model_id)
    for key, value in tags.items():
        client.set_model_version_tag(name, version.version, key, str(redact_value(str(value))))
    return int(version.version)


def collect_metrics(client, run_id: str) -> dict[str, float]:
    """The run's metrics, with its parent run's metrics added under their own names where the run lacks them."""
    run = client.get_run(run_id)
    metrics = dict(run.data.metrics)
    parent_id = run.data.tags.get("mlflow.parentRunId")
    if parent_id:
        for key, value in client.get_run(parent_id).data.metrics.items():
            metrics.setdefault(key, value)
    return metrics


def model_card(name: str, version: int, tags: Mapping[str, Any], metrics: Mapping[str, float]) -> str:
    """A markdown model card: what was done (lineage) and the numbers (bits per byte, fertility, benchmarks)."""
    language = tags.get("vocadapt.target_language", "target")
    lines = [
        f"# {name} version {version}",
        "",
        f"Vocabulary adaptation of `{tags.get('vocadapt.source_model')}` to `{language}` with the "
        f"`{tags.get('vocadapt.method')}` initialiser, made by vocadapt.",
        "",
        *([f"**Twin, not a real model**: {tags['vocadapt.twin']}.", ""] if tags.get("vocadapt.twin") else []),
        "## Lineage",
        "",
        "| tag | value |",
        "| --- | --- |",
        *(f"| {key} | `{value}` |" for key, value in sorted(tags.items()) if key.startswith("vocadapt.")),
        "",
        "## Numbers",
        "",
        "Bits per byte on held-out text (lower is better; comparable across tokenizers); fertility in tokens "
        "per word.",
        "",
        "| metric | value |",
        "| --- | --- |",
        *(f"| {key} | {value:.4f} |" for key, value in sorted(metrics.items())
          if key.startswith(("bpb_", "source_model.", "fertility.", "benchmark."))),
        "",
        "## Use",
        "",
        f"`vocadapt serve models:/{name}@champion` (once promoted) starts an OpenAI-compatible vLLM server; "
        f"`mlflow models serve -m models:/{name}@champion --env-manager local` serves the MLflow model "
        f"(`mlflow.pyfunc.load_model` loads it). The checkpoint is pinned by `{MANIFEST}` (sha256 "
        f"`{tags.get('vocadapt.manifest_sha256')}`).",
        "",
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------- promotion


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _who() -> str:
    return os.environ.get("MLFLOW_TRACKING_USERNAME") or getpass.getuser()


def _model_version(client, name: str, version: int):
    from mlflow.exceptions import MlflowException

    try:
        return client.get_model_version(name, str(version))
    except MlflowException as error:
        if "RESOURCE_DOES_NOT_EXIST" in str(error.error_code) or "not found" in str(error).lower():
            raise UserError(f"registered model {name!r} has no version {version}; list versions with "
                            f"`mlflow models` or the MLflow UI") from error
        raise


def alias_history(client, name: str, alias: str) -> list[int]:
    """Versions that ``alias`` was moved to by promotion, oldest first (rollbacks pop the last one)."""
    model = client.get_registered_model(name)
    return [int(v) for v in json.loads(model.tags.get(_HISTORY_TAG.format(alias=alias), "[]"))]


def _set_history(client, name: str, alias: str, history: list[int]) -> None:
    client.set_registered_model_tag(name, _HISTORY_TAG.format(alias=alias), json.dumps(history[-_HISTORY_KEEP:]))


def _current(client, name: str, alias: str) -> int | None:
    model = client.get_registered_model(name)
    return int(model.aliases[alias]) if alias in (model.aliases or {}) else None


def recorded_gates(model_version) -> tuple[PromotionGates, str]:
    """The gates recorded on a version at registration (tag ``vocadapt.promotion_gates``), else the defaults; with
    where they came from, in words."""
    from pydantic import ValidationError

    version = model_version.version
    text = model_version.tags.get(GATES_TAG)
    if not text:
        return PromotionGates(), f"the defaults (PromotionGates): none recorded on version {version}"
    sweep = model_version.tags.get("vocadapt.sweep.name")
    origin = f"recorded on version {version}" + (f" by sweep {sweep}" if sweep else "") + f" (tag {GATES_TAG})"
    try:
        return PromotionGates.model_validate_json(text), origin
    except ValidationError as error:
        problems = "; ".join((f"{'.'.join(map(str, e['loc']))}: " if e["loc"] else "")
                             + e["msg"].removeprefix("Value error, ") for e in error.errors())
        raise UserError(f"the gates {origin} are not valid gates now ({problems}); pass --gates FILE") from error


def promote(client, name: str, version: int, *, alias: str = "champion", gates: PromotionGates | None = None,
            gates_from: str = "given by the caller") -> PromotionDecision:
    """Check the gates for ``name`` version ``version``; move ``alias`` only if every gate passes (an undecided
    gate, one that passes on its estimate but not on its 95% interval, does not).

    Without ``gates``, the gates recorded on the version at registration apply, else the defaults. The decision
    is recorded on the version either way (tags ``vocadapt.promotion.<alias>.*``, with where the gates came from).
    """
    model_version = _model_version(client, name, version)
    if gates is None:
        gates, gates_from = recorded_gates(model_version)
    if not model_version.run_id:
        raise UserError(f"{name} version {version} has no run; only versions registered from a run can be gated")
    language = gated_languages(model_version.tags)  # every target language of the model
    from vocadapt.platform.registry.gate_items import collect_gate_items

    # per-item parts (gates/items.json of the run and its parent) give each gate its bootstrap interval
    results = evaluate_gates(collect_metrics(client, model_version.run_id), gates, language,
                             collect_gate_items(client, model_version.run_id))
    decision = PromotionDecision(name, int(version), alias, results, previous=_current(client, name, alias),
                                 gates_from=gates_from)
    prefix = f"vocadapt.promotion.{alias}"
    decision.tags = {
        f"{prefix}.decision": "accepted" if decision.accepted else "refused",
        f"{prefix}.at": _now(),
        f"{prefix}.by": _who(),
        f"{prefix}.gates": json.dumps([g.as_dict() for g in results], separators=(",", ":"))[:4900],
        f"{prefix}.gates_from": gates_from,
    }
    if decision.accepted:
        client.set_registered_model_alias(name, alias, str(version))
        history = alias_history(client, name, alias)
        if decision.previous is not None and (not history or history[-1] != decision.previous):
            history.append(decision.previous)  # an alias set by hand still counts as a previous champion
        if not history or history[-1] != int(version):
            history.append(int(version))
        _set_history(client, name, alias, history)
        decision.tags[f"{prefix}.previous"] = str(decision.previous) if decision.previous is not None else ""
    for key, value in decision.tags.items():
        client.set_model_version_tag(name, str(version), key, value)
    return decision


def rollback(client, name: str, *, alias: str = "champion") -> tuple[int, int]:
    """Move ``alias`` back to the version it pointed at before the last promotion; returns (from, to)."""
    history = alias_history(client, name, alias)
    current = _current(client, name, alias)
    if current is None:
        raise UserError(f"registered model {name!r} has no {alias!r} alias; nothing to roll back")
    if current in history:
        history = history[: len(history) - history[::-1].index(current)]
    if len(history) < 2 or history[-1] != current:
        raise UserError(f"{name}@{alias} (version {current}) has no previous {alias} in its history; "
                        f"promote another version with `vocadapt promote {name} --version V --to {alias}`")
    previous = history[-2]
    client.set_registered_model_alias(name, alias, str(previous))
    _set_history(client, name, alias, history[:-1])
    client.set_model_version_tag(name, str(current), f"vocadapt.rollback.{alias}",
                                 json.dumps({"at": _now(), "by": _who(), "to": previous}))
    client.set_model_version_tag(name, str(previous), f"vocadapt.promotion.{alias}.restored_at", _now())
    return current, previous


def registry_client(tracking_uri: str | None):
    """An MLflow client for the registry at ``tracking_uri`` (the process-wide MLflow URIs are left as they are);
    an authentication failure becomes a clear user error."""
    import mlflow

    from vocadapt.platform.tracking import resolve_tracking_uri

    uri = resolve_tracking_uri(tracking_uri)
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).is_file():
        # opening a missing SQLite store would create an empty one: refused instead, nothing written
        raise UserError(f"no MLflow store at {uri}: run this where `vocadapt adapt` wrote mlflow.db, or pass "
                        "--tracking-uri (or set MLFLOW_TRACKING_URI)")
    return mlflow.tracking.MlflowClient(tracking_uri=uri, registry_uri=uri)


def explain_mlflow_error(error: Exception) -> UserError:
    """An MLflow failure as a user error: a refused login names the variables that fix it."""
    text = str(error)
    if "401" in text or "403" in text or "UNAUTHENTICATED" in text or "PERMISSION_DENIED" in text:
        return UserError(
            f"the MLflow server refused the request ({text.splitlines()[0][:200]}); set MLFLOW_TRACKING_USERNAME "
            f"and MLFLOW_TRACKING_PASSWORD to a user allowed to manage this model"
        )
    return UserError(f"MLflow: {text.splitlines()[0][:300]}")
