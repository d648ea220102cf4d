"""MLflow at the edge: where runs go, parent and child runs, redacted params, registration with lineage.

Default store: a SQLite file in the working folder, with experiments created up front with an explicit
``artifact_location`` (an experiment created implicitly would put artifacts in ``./mlruns`` or a temporary folder).
``MLFLOW_TRACKING_URI`` (or ``tracking.tracking_uri``) points it at a tracking server instead; then the server
decides where artifacts go.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_DB = "mlflow.db"
DEFAULT_ARTIFACTS = "mlartifacts"
# a key segment that names a secret: hf_token, mlflow.password, MLFLOW_TRACKING_TOKEN, aws_secret_access_key;
# not tokenizer.vocab_size or lapt.max_tokens
_SECRET_KEY = re.compile(
    r"(^|[._-])(token|password|passwd|secret|api[_-]?key|credentials?|auth)($|[._-])", re.IGNORECASE
)
_URI_CREDENTIALS = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<creds>[^/@\s]+)@", re.IGNORECASE)
REDACTED = "***"


def resolve_tracking_uri(configured: str | None = None, workdir: Path | None = None) -> str:
    """The config's URI, else $MLFLOW_TRACKING_URI, else a SQLite store in ``workdir`` (default: cwd)."""
    uri = configured or os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    workdir = (workdir or Path.cwd()).resolve()
    return f"sqlite:///{workdir / DEFAULT_DB}"


def is_local_store(uri: str) -> bool:
    return uri.startswith(("sqlite:", "file:")) or "://" not in uri


def redact_value(value: Any) -> Any:
    """Credentials inside URIs (``https://user:pass@host``) become ``***@``."""
    if isinstance(value, str):
        return _URI_CREDENTIALS.sub(lambda m: f"{m['scheme']}{REDACTED}@", value)
    return value


def redact(params: Mapping[str, Any]) -> dict[str, Any]:
    """Params or tags safe to log: values of secret-looking keys are replaced, URI credentials stripped."""
    safe = {}
    for key, value in params.items():
        if _SECRET_KEY.search(key) and value not in (None, "", False):
            safe[key] = REDACTED
        else:
            safe[key] = redact_value(value)
    return safe


def redact_tree(data: Any, *, mask_keys: bool = True) -> Any:
    """A nested config (dicts, lists) safe to log or print: URI credentials stripped everywhere and, with
    ``mask_keys``, values of secret-looking keys masked (off for result records, whose keys such as
    ``new_token_ids`` are not secrets)."""
    if isinstance(data, Mapping):
        return {key: (REDACTED if mask_keys and isinstance(key, str) and _SECRET_KEY.search(key)
                      and value not in (None, "", False) else redact_tree(value, mask_keys=mask_keys))
                for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [redact_tree(item, mask_keys=mask_keys) for item in data]
    return redact_value(data)


def git_commit(path: Path | None = None) -> str:
    """The checkout's HEAD commit, with ``-dirty`` when it has uncommitted changes; 'unknown' outside git."""
    cwd = path or Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd, capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{commit}-dirty" if dirty else commit


def sha256_files(paths: list[Path] | tuple[Path, ...]) -> str:
    """One sha256 over the files' bytes, in the given order (each file's name does not count)."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def sha256_tree(folder: Path) -> str:
    """One sha256 over every file of a folder, by relative path then bytes."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode())
        digest.update(sha256_files([path]).encode())
    return digest.hexdigest()


# (run name, run id) of every run this process ended as KILLED after a Ctrl-C, innermost first
KILLED_RUNS: list[tuple[str, str]] = []


@dataclass
class Tracker:
    """One experiment in one tracking store."""

    tracking_uri: str
    experiment: str
    artifact_root: Path | None = None

    def __post_init__(self) -> None:
        import mlflow

        self._mlflow = mlflow
        self.client = mlflow.tracking.MlflowClient(tracking_uri=self.tracking_uri, registry_uri=self.tracking_uri)
        mlflow.set_tracking_uri(self.tracking_uri)
        mlflow.set_registry_uri(self.tracking_uri)
        self.experiment_id = self._ensure_experiment()

    def _ensure_experiment(self) -> str:
        existing = self.client.get_experiment_by_name(self.experiment)
        if existing is not None:
            if existing.lifecycle_stage == "deleted":
                self.client.restore_experiment(existing.experiment_id)
            return existing.experiment_id
        location = None
        if is_local_store(self.tracking_uri):
            root = (self.artifact_root or Path.cwd() / DEFAULT_ARTIFACTS).resolve()
            location = (root / self.experiment).as_uri()
        try:
            return self.client.create_experiment(self.experiment, artifact_location=location)
        except Exception:  # a concurrent creator won the race: use theirs
            existing = self.client.get_experiment_by_name(self.experiment)
            if existing is None:
                raise
            return existing.experiment_id

    @contextmanager
    def run(self, name: str, *, parent_run_id: str | None = None, tags: Mapping[str, str] | None = None) -> Iterator[Any]:
        """Start a run (nested under ``parent_run_id`` when given); FINISHED on success, KILLED on Ctrl-C
        (KeyboardInterrupt, recorded in ``KILLED_RUNS`` for the command's closing message), FAILED on an exception."""
        all_tags = dict(redact(tags or {}))
        if parent_run_id:
            all_tags["mlflow.parentRunId"] = parent_run_id
        run = self.client.create_run(self.experiment_id, run_name=name, tags=all_tags)
        try:
            yield run
        except KeyboardInterrupt:
            self.client.set_terminated(run.info.run_id, status="KILLED")
            KILLED_RUNS.append((name, run.info.run_id))
            raise
        except BaseException:
            self.client.set_terminated(run.info.run_id, status="FAILED")
            raise
        self.client.set_terminated(run.info.run_id, status="FINISHED")

    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        safe = redact(params)
        entries = [Param(key, str(value)[:6000]) for key, value in safe.items()]
        for start in range(0, len(entries), 100):
            self.client.log_batch(run_id, params=entries[start : start + 100])

    def log_metrics(self, run_id: str, metrics: Mapping[str, float], step: int | None = None) -> None:
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        entries = [Metric(key, float(value), now, step or 0) for key, value in metrics.items() if value is not None]
        if entries:
            self.client.log_batch(run_id, metrics=entries)

    def set_tags(self, run_id: str, tags: Mapping[str, Any]) -> None:
        for key, value in redact(tags).items():
            self.client.set_tag(run_id, key, str(value))

    def log_artifact(self, run_id: str, path: Path, artifact_path: str | None = None) -> None:
        if path.is_dir():
            self.client.log_artifacts(run_id, str(path), artifact_path)
        else:
            self.client.log_artifact(run_id, str(path), artifact_path)

    def log_text(self, run_id: str, text: str, artifact_file: str) -> None:
        self.client.log_text(run_id, redact_value(text), artifact_file)  # URI credentials never reach an artifact

    def log_dict(self, run_id: str, data: Any, artifact_file: str) -> None:
        self.client.log_dict(run_id, redact_tree(data, mask_keys=False), artifact_file)

    def metric_logger(self, run_id: str) -> MLflowMetricLogger:
        return MLflowMetricLogger(self, run_id)

    def log_model_directory(self, run_id: str, model_dir: Path, name: str = "model") -> str:
        """Log a saved transformers checkpoint (safetensors, config, tokenizer) as run artifacts; returns its URI.

        Logged as plain files rather than ``mlflow.transformers.log_model``: mlflow 3.17.2 cannot build the flavor
        config of a checkpoint directory under transformers 5 (``'str' object has no attribute '__name__'``), and
        loading the model only to log it would double the memory. The registry only needs the source URI.
        """
        self.client.log_artifacts(run_id, str(model_dir), name)
        return f"{self.client.get_run(run_id).info.artifact_uri}/{name}"

    def register(
        self, model_uri: str, name: str, *, alias: str, tags: Mapping[str, Any], run_id: str | None = None
    ) -> int:
        """Register ``model_uri`` as a new version of ``name``, tag it with lineage, point ``alias`` at it."""
        from mlflow.exceptions import MlflowException

        try:
            self.client.create_registered_model(name)
        except MlflowException as error:
            if "RESOURCE_ALREADY_EXISTS" not in str(error.error_code):
                raise
        version = self.client.create_model_version(name, model_uri, run_id=run_id)
        for key, value in redact(tags).items():
            self.client.set_model_version_tag(name, version.version, key, str(value))
        self.client.set_registered_model_alias(name, alias, version.version)
        return int(version.version)


@dataclass
class MLflowMetricLogger:
    """The ``MetricLogger`` protocol of ``components.metric_logging``, writing into one MLflow run."""

    tracker: Tracker
    run_id: str

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        self.tracker.log_metrics(self.run_id, metrics, step)


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)
