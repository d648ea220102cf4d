"""GGUF export at the edges: llama.cpp's converter as an asset, llama-cpp-python's presence, and a registered
version's export logged back to its run.

llama.cpp's converter (``convert_hf_to_gguf.py``, its ``conversion`` package and its own ``gguf-py``) is not in any
wheel; it ships in the llama-cpp-python source distribution, the same release whose compiled library loads and
quantises the files. It is fetched once from pip's index (the sdist's sha256 is checked before anything is
unpacked) into ``$VOCADAPT_HOME/llama-cpp/<version>/converter``.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from vocadapt.components.errors import UserError
from vocadapt.components.export.gguf import GgufFile, export_gguf
from vocadapt.platform.assets.embedded import file_sha256, vocadapt_home

LLAMA_CPP_PYTHON = "0.3.36"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
_CONVERTER_FILES = ("convert_hf_to_gguf.py", "conversion/", "gguf-py/gguf/", "LICENSE")
INSTALL_HINT = (f"install llama.cpp's Python binding: `make gguf-tools` (pip install llama-cpp-python=="
                f"{LLAMA_CPP_PYTHON}; it compiles llama.cpp once, a few minutes, then pip's cache reuses the wheel)")


def require_llama_cpp() -> None:
    """``UserError`` naming the fix when llama-cpp-python (llama.cpp's loader and quantiser) is not installed."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError as error:
        raise UserError(f"llama-cpp-python is not installed; {INSTALL_HINT}") from error


def converter_dir(home: Path | None = None, log=print) -> Path:
    """The folder holding llama.cpp's ``convert_hf_to_gguf.py``; fetched from pip's index the first time."""
    from vocadapt.platform.families.assets import _fetch_pypi_sdist

    home = Path(home) if home else vocadapt_home()
    folder = home / "llama-cpp" / LLAMA_CPP_PYTHON / "converter"
    if (folder / "convert_hf_to_gguf.py").is_file():
        return folder
    downloads = home / "downloads" / "llama-cpp"
    downloads.mkdir(parents=True, exist_ok=True)
    archive = downloads / f"llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz"
    if not archive.is_file() or file_sha256(archive) != SDIST_SHA256:
        log(f"fetching llama.cpp's converter (llama-cpp-python {LLAMA_CPP_PYTHON} source, 77 MB) from pip's index")
        with tempfile.TemporaryDirectory(dir=downloads) as scratch:
            fetched = _fetch_pypi_sdist({"package": "llama-cpp-python", "version": LLAMA_CPP_PYTHON}, Path(scratch))
            if file_sha256(fetched) != SDIST_SHA256:
                raise UserError(f"{fetched.name} from pip's index is not the expected file (sha256 differs from "
                                f"{SDIST_SHA256[:12]}...); check PIP_INDEX_URL")
            os.replace(fetched, archive)
    prefix = f"llama_cpp_python-{LLAMA_CPP_PYTHON}/vendor/llama.cpp/"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent) as scratch, tarfile.open(archive) as tar:
        members = [member for member in tar.getmembers() if member.isfile() and member.name.startswith(prefix)
                   and member.name.removeprefix(prefix).startswith(_CONVERTER_FILES)]
        for member in members:
            member.name = member.name.removeprefix(prefix)
        tar.extractall(scratch, members=members, filter="data")
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(scratch, folder)
        Path(scratch).mkdir()  # the context manager removes it again
    return folder


@dataclass(frozen=True)
class RegisteredExport:
    gguf: GgufFile
    name: str
    version: int
    run_id: str
    artifact_path: str


def default_out_path(model: str, quant: str) -> Path:
    """``NAME-vVERSION-QUANT.gguf`` for a registered version, ``FOLDER-QUANT.gguf`` for a folder (current folder)."""
    if model.startswith("models:/"):
        stem = model.removeprefix("models:/").replace("@", "-").replace("/", "-v")
    else:
        stem = Path(model).resolve().name
    return Path(f"{stem}-{quant}.gguf")


def export_folder(model_dir: Path, out_path: Path, quant: str, log=print) -> GgufFile:
    """A checkpoint folder to ``out_path`` (refused, with nothing written, when llama.cpp cannot represent it)."""
    from vocadapt.platform.model_loading import check_model_folder

    model_dir = Path(model_dir)
    check_model_folder(model_dir, what="model to export")
    if quant != "f16":
        require_llama_cpp()
    return export_gguf(model_dir, out_path, quant, converter_dir(log=log))


def export_registered(uri: str, out_path: Path, quant: str, tracking_uri: str | None, log=print) -> RegisteredExport:
    """A registered version (``models:/NAME/VERSION`` or ``models:/NAME@alias``), verified against its manifest,
    to ``out_path``; the file is logged as an artifact of the version's run (``gguf/``), and the version gets the
    tags ``vocadapt.gguf.<quant>.sha256`` and ``vocadapt.gguf.<quant>.artifact``."""
    from vocadapt.platform.registry.model_versions import registry_client
    from vocadapt.platform.serving.registered import download_verified
    from vocadapt.platform.tracking import resolve_tracking_uri

    uri_tracking = resolve_tracking_uri(tracking_uri)
    client = registry_client(tracking_uri)
    if quant != "f16":
        require_llama_cpp()
    converter = converter_dir(log=log)
    with tempfile.TemporaryDirectory(prefix="vocadapt-export-") as scratch:
        model = download_verified(client, uri, Path(scratch) / "checkpoint", uri_tracking)
        log(f"{uri} is version {model.version} of {model.name}; converting")
        exported = export_gguf(model.model_dir, out_path, quant, converter)
    version = client.get_model_version(model.name, str(model.version))
    client.log_artifact(version.run_id, str(exported.path), artifact_path="gguf")
    artifact = f"gguf/{exported.path.name}"
    client.set_model_version_tag(model.name, str(model.version), f"vocadapt.gguf.{quant}.sha256", exported.sha256)
    client.set_model_version_tag(model.name, str(model.version), f"vocadapt.gguf.{quant}.artifact",
                                 f"runs:/{version.run_id}/{artifact}")
    return RegisteredExport(exported, model.name, model.version, version.run_id, artifact)


def require_exported_gguf(client, name: str, version: int, quant: str) -> str:
    """The ``runs:/`` URI of version ``version``'s exported GGUF at ``quant`` (``any``: the first of f16, q8_0,
    q4_k_m there is), as ``vocadapt export`` logs it: its sha256 tag set and the file among the run's artifacts.
    ``UserError`` naming what is missing and the export command otherwise."""
    from vocadapt.components.export.gguf import QUANTS

    if quant != "any" and quant not in QUANTS:
        raise UserError(f"--require-gguf {quant!r}: choose one of {', '.join(QUANTS)}, or any")
    tags = client.get_model_version(name, str(version)).tags
    missing = []
    for wanted in QUANTS if quant == "any" else (quant,):
        digest = tags.get(f"vocadapt.gguf.{wanted}.sha256")
        artifact = tags.get(f"vocadapt.gguf.{wanted}.artifact", "")
        if not digest or not artifact.startswith("runs:/"):
            missing.append(f"{wanted}: no tags vocadapt.gguf.{wanted}.sha256 and .artifact")
            continue
        run_id, _, path = artifact.removeprefix("runs:/").partition("/")
        listed = {entry.path: entry for entry in client.list_artifacts(run_id, str(Path(path).parent))}
        if path not in listed or not listed[path].file_size:
            missing.append(f"{wanted}: tagged {artifact}, but run {run_id} has no such artifact")
            continue
        return artifact
    export = f"vocadapt export models:/{name}/{version} --format gguf --quant {'f16' if quant == 'any' else quant}"
    raise UserError(f"{name} version {version} has no exported GGUF logged with its sha256 ({'; '.join(missing)}), "
                    f"and --require-gguf {quant} asks for one; export it first (`{export}`), then promote again. "
                    "No alias was moved")
