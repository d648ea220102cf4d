"""Serving a registered model: resolve ``models:/NAME@alias`` (or ``models:/NAME/VERSION``), download its MLflow
model, verify the checkpoint it carries against the manifest recorded at registration, then start a vLLM
OpenAI-compatible server for it from the serving environment (``platform/evaluation/serving.py`` owns that
environment and the server process).

Nothing is started for a model that fails verification: a missing tokenizer file or a sha256 mismatch refuses it,
and the refused download is removed.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from vocadapt.components.errors import UserError
from vocadapt.platform.registry.mlflow_model import checkpoint_dir, download_model
from vocadapt.platform.registry.model_versions import MANIFEST, ModelFilesError, verify_model_files

_MODEL_URI = re.compile(r"^models:/(?P<name>[^/@]+)(?:@(?P<alias>[^/]+)|/(?P<version>\d+))$")


@dataclass
class VerifiedModel:
    name: str
    version: int
    model_dir: Path
    tags: dict[str, str]


def parse_model_uri(uri: str) -> tuple[str, str | None, int | None]:
    """``models:/NAME@alias`` -> (NAME, alias, None); ``models:/NAME/3`` -> (NAME, None, 3)."""
    match = _MODEL_URI.match(uri)
    if not match:
        raise UserError(f"{uri!r} is not a registered model URI; write models:/NAME@champion or models:/NAME/3")
    version = match["version"]
    return match["name"], match["alias"], int(version) if version else None


def resolve_version(client, uri: str):
    """The ModelVersion a registry URI points at; a clear error when the name or alias does not exist."""
    from mlflow.exceptions import MlflowException

    name, alias, version = parse_model_uri(uri)
    try:
        if alias:
            return client.get_model_version_by_alias(name, alias)
        return client.get_model_version(name, str(version))
    except MlflowException as error:
        raise UserError(f"{uri} does not resolve ({str(error).splitlines()[0][:200]}); check the name and alias "
                        f"(`vocadapt promote NAME --version V --to champion` sets one)") from error


def download_verified(client, uri: str, destination: Path, tracking_uri: str) -> VerifiedModel:
    """Download the version's files into ``destination`` and verify them; nothing is left there if refused. An
    existing ``destination`` is replaced only when it is an earlier download (it holds a vocadapt manifest) or
    empty: any other folder is refused before anything is downloaded, so a mistyped path never loses files."""
    destination = Path(destination)
    if destination.exists() and (not destination.is_dir() or (any(destination.iterdir())
                                                               and not (destination / MANIFEST).is_file())):
        raise UserError(f"--download-dir {destination} exists and is not a model vocadapt downloaded (no {MANIFEST} "
                        "in it); name a new or empty folder, or remove that one yourself")
    model_version = resolve_version(client, uri)
    manifest_sha = model_version.tags.get("vocadapt.manifest_sha256")
    if not manifest_sha:
        raise ModelFilesError(f"{uri} (version {model_version.version}) has no vocadapt.manifest_sha256 tag, so its "
                              f"files cannot be verified; register it through vocadapt (adapt or sweep)")
    staging = destination.with_name(f".{destination.name}.download")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        local = download_model(model_version.source, staging, tracking_uri)
        checkpoint = checkpoint_dir(local)  # the checkpoint the MLflow model carries
        verify_model_files(checkpoint, manifest_sha)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(destination, ignore_errors=True)
    checkpoint.rename(destination)
    shutil.rmtree(staging, ignore_errors=True)
    return VerifiedModel(model_version.name, int(model_version.version), destination, dict(model_version.tags))


@contextmanager
def serve_verified(model: VerifiedModel, *, venv: Path | None = None, port: int | None = None,
                   max_model_len: int = 2048, log_file: Path | None = None,
                   startup_timeout_s: float = 600.0) -> Iterator[tuple[str, str]]:
    """Start vLLM for a verified model; yields (OpenAI base URL ``http://127.0.0.1:PORT/v1``, served model name)."""
    from vocadapt.platform.evaluation.serving import VllmServer

    verify_model_files(model.model_dir, model.tags.get("vocadapt.manifest_sha256"))  # again, just before loading
    from vocadapt.platform.model_loading import check_model_folder

    check_model_folder(model.model_dir, what=f"{model.name} version {model.version}")  # safetensors, no custom code
    served_name = model.name
    server = VllmServer(model.model_dir, venv=venv, port=port, max_model_len=max_model_len, log_file=log_file,
                        startup_timeout_s=startup_timeout_s, extra_args=["--served-model-name", served_name],
                        without_vllm="or pass --serving-venv (or set $VOCADAPT_SERVING_VENV) to an existing one")
    with server:
        yield f"{server.base_url}/v1", served_name
