"""The embedded default: SmolLM2-135M-Instruct and English / target-language corpora, built once under
``$VOCADAPT_HOME`` (default ``~/.cache/vocadapt``).

Layout::

    manifest.json                                 sources, licences, and lines / bytes / sha256 of every file
    models/smollm2-135m/                          Hugging Face folder (safetensors, fp32) with its tokenizer
    corpora/<lang>/{train,validation,test}.txt    one paragraph or verse per line
    corpora/parallel/<lang>-en/{split}.jsonl      {"key", "source", "en", "<lang>"} per line
    lexicons/en.txt                               English word list (Debian's wamerican/wbritish), one per line
    word_vectors/<lang>.bin                       fastText word model of each language's corpus (WECHSEL)
    dictionaries/en-<lang>.txt                    English<TAB>target word pairs from Debian's FreeDict (WECHSEL)
    downloads/debs/                               the Debian help packages (a cache; unpacked only while building)

Every part is written in a temporary folder and renamed into place, and the manifest is written last, so an
interrupted build leaves nothing half-written. A build with everything already listed in the manifest returns at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from vocadapt.components.corpora.splits import SPLITS
from vocadapt.components.errors import UserError

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = 1
MODEL_NAME = "smollm2-135m"
LEXICON_LANGUAGES = ("en",)  # word lists built with the assets: the source language of every embedded model


class AssetsNotBuilt(UserError):
    """The embedded default (or one of its languages) is missing under the home folder."""


def vocadapt_home() -> Path:
    """``$VOCADAPT_HOME`` or ``~/.cache/vocadapt``."""
    configured = os.environ.get("VOCADAPT_HOME")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "vocadapt"


@dataclass(frozen=True)
class EmbeddedAssets:
    """The built embedded default: where its model and corpora are, and its manifest."""

    home: Path
    manifest: dict[str, Any]

    @property
    def model_dir(self) -> Path:
        return self.home / self.manifest["model"]["dir"]

    @property
    def languages(self) -> tuple[str, ...]:
        return tuple(sorted(self.manifest["corpora"]))

    def corpus(self, lang: str, split: str) -> Path:
        """``corpora/<lang>/<split>.txt``: one paragraph or verse per line."""
        return self._existing(Path("corpora") / lang / f"{split}.txt", lang, split)

    def parallel(self, lang: str, split: str) -> Path:
        """``corpora/parallel/<lang>-en/<split>.jsonl``: {"key", "source", "en", "<lang>"} per line."""
        if lang == "en":
            raise ValueError("parallel corpora pair a target language with English: ask for e.g. parallel('it', ...)")
        return self._existing(Path("corpora") / "parallel" / f"{lang}-en" / f"{split}.jsonl", lang, split)

    def lexicon(self, lang: str) -> Path | None:
        """``lexicons/<lang>.txt``, a word list of the language (English: Debian's), or None where none was built."""
        entry = self.manifest.get("lexicons", {}).get(lang) or {}
        return self.home / entry["file"] if "file" in entry else None

    def _existing(self, relative: Path, lang: str, split: str) -> Path:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}: use one of {', '.join(SPLITS)}")
        if lang not in self.manifest["corpora"]:
            raise AssetsNotBuilt(
                f"no {lang!r} corpus in the embedded assets under {self.home}: run `vocadapt assets --lang {lang}`"
            )
        return self.home / relative

    def sha256(self, path: Path) -> str:
        """The sha256 the manifest records for a built file (for lineage tags), without reading it again."""
        relative = Path(path).resolve().relative_to(self.home.resolve()).as_posix()
        if relative not in self.manifest["files"]:
            raise KeyError(f"{relative} is not a file of the embedded assets under {self.home}")
        return self.manifest["files"][relative]["sha256"]

    def verify(self) -> list[str]:
        """Files whose size or sha256 differs from the manifest (or that are missing); [] when all match."""
        problems = []
        for relative, expected in sorted(self.manifest["files"].items()):
            path = self.home / relative
            if not path.is_file():
                problems.append(f"{relative}: missing")
            elif path.stat().st_size != expected["bytes"] or file_sha256(path) != expected["sha256"]:
                problems.append(f"{relative}: changed since the build")
        return problems


def load_assets(home: Path | None = None, languages: Sequence[str] = ("it",)) -> EmbeddedAssets:
    """The built embedded default with (at least) ``languages`` and English; AssetsNotBuilt when missing."""
    home = Path(home) if home is not None else vocadapt_home()
    manifest = _read_manifest(home)
    if manifest is None:
        raise AssetsNotBuilt(f"embedded assets are not built under {home}: run `vocadapt assets`")
    missing = [lang for lang in _with_english(languages) if lang not in manifest["corpora"]]
    if missing:
        flags = " ".join(f"--lang {lang}" for lang in missing)
        raise AssetsNotBuilt(
            f"embedded assets under {home} lack the corpora for {', '.join(missing)}: run `vocadapt assets {flags}`"
        )
    absent = [relative for relative in manifest["files"] if not (home / relative).is_file()]
    if absent:
        raise AssetsNotBuilt(
            f"embedded assets under {home} are incomplete ({len(absent)} files missing, e.g. {absent[0]}): "
            "run `vocadapt assets --force`"
        )
    return EmbeddedAssets(home=home, manifest=manifest)


def build_assets(
    home: Path | None = None,
    languages: Sequence[str] = ("it",),
    force: bool = False,
    console: Console | None = None,
) -> EmbeddedAssets:
    """Build what is missing of the embedded default (the model, English, ``languages``) and return it.

    Instant when the manifest already lists everything asked for (unless ``force``). Several processes may call it
    at once: a lock file makes the later ones wait and then find the work done.
    """
    from vocadapt.platform.assets import builders as asset_builders

    home = Path(home) if home is not None else vocadapt_home()
    languages = _with_english(languages)
    asset_builders.check_languages(languages)
    console = console or Console(stderr=True)
    home.mkdir(parents=True, exist_ok=True)
    with _build_lock(home):
        # Even when forced, languages not asked for stay in the manifest: their files are kept as they are.
        manifest = _read_manifest(home)
        manifest = manifest or {"format": MANIFEST_FORMAT, "model": None, "corpora": {}, "sources": {}, "files": {}}
        todo = [lang for lang in languages if force or lang not in manifest["corpora"]]
        lexicons = manifest.setdefault("lexicons", {})
        # a word list recorded as missing (a failed download) is tried again on every build until one is written
        lexicon_todo = [lang for lang in LEXICON_LANGUAGES if force or "file" not in lexicons.get(lang, {})]
        vectors_todo, dictionaries_todo = _wechsel_todo(manifest, languages, force)
        if manifest["model"] is not None and not todo and not lexicon_todo and not vectors_todo + dictionaries_todo:
            return load_assets(home, languages)
        workspace = Path(tempfile.mkdtemp(prefix=".build-", dir=home))
        try:
            if manifest["model"] is None or force:
                model_entry = asset_builders.build_model(workspace, console)
                _move_into_place(workspace, home, Path(model_entry["dir"]))
                manifest["model"] = model_entry
                _forget_files(manifest, model_entry["dir"])
            if todo:
                built = asset_builders.build_corpora(todo, home / "downloads", workspace, console)
                for lang, entry in built.corpora.items():
                    for relative in entry["folders"]:
                        _move_into_place(workspace, home, Path(relative))
                        _forget_files(manifest, relative)
                    manifest["corpora"][lang] = entry
                manifest["sources"].update(built.sources)
                for warning in built.warnings:
                    console.print(f"[yellow]warning:[/] {warning}", highlight=False)
            for lang in lexicon_todo:
                entry = asset_builders.build_lexicon(lang, home / "downloads", workspace, console)
                if "file" in entry:
                    _move_into_place(workspace, home, Path(entry["file"]))
                    manifest["files"].pop(entry["file"], None)
                else:
                    console.print(f"[yellow]warning:[/] no {lang} lexicon: {entry['missing']}; vocabulary "
                                  "expansion protects the source-language corpus only", highlight=False)  # fmt: skip
                lexicons[lang] = entry
            _build_wechsel_inputs(manifest, home, workspace, vectors_todo, dictionaries_todo, console)
            _record_files(manifest, home)
            _write_manifest(home, manifest)
        finally:
            shutil.rmtree(workspace, ignore_errors=True)
    return load_assets(home, languages)


def _wechsel_todo(manifest: dict[str, Any], languages: Sequence[str], force: bool) -> tuple[list[str], list[str]]:
    """Languages whose fastText word model, and target languages whose English dictionary, are still to build
    (WECHSEL's inputs, ``platform/assets/word_vectors.py``), or were built with other settings; an entry recorded as missing
    is retried only with ``force``."""
    from vocadapt.platform.assets.word_vectors import DICTIONARY_FORMAT, word_vector_settings

    vectors = manifest.setdefault("word_vectors", {})
    dictionaries = manifest.setdefault("dictionaries", {})
    outdated_vectors = {lang for lang, entry in vectors.items()
                        if "file" in entry and entry.get("settings") != word_vector_settings()}
    outdated_dictionaries = {key for key, entry in dictionaries.items()
                             if "file" in entry and entry.get("format") != DICTIONARY_FORMAT}
    vectors_todo = [lang for lang in languages if force or lang not in vectors or lang in outdated_vectors]
    dictionaries_todo = [lang for lang in languages if lang != "en" and (
        force or f"en-{lang}" not in dictionaries or f"en-{lang}" in outdated_dictionaries)]
    return vectors_todo, dictionaries_todo


def _build_wechsel_inputs(manifest: dict[str, Any], home: Path, workspace: Path, vectors_todo: list[str],
                          dictionaries_todo: list[str], console: Console) -> None:
    """Train the word models and build the dictionaries still missing, move each into place and record it (or
    record why it is missing: a warning, not a failure, since only WECHSEL needs them)."""
    from vocadapt.platform.assets import word_vectors

    built = [(manifest["word_vectors"], lang, word_vectors.build_word_vectors(
        lang, home / "corpora" / lang / "train.txt", workspace, console)) for lang in vectors_todo]
    built += [(manifest["dictionaries"], f"en-{lang}", word_vectors.build_dictionary(
        lang, home / "downloads", workspace, console)) for lang in dictionaries_todo]
    for section, key, entry in built:
        if "file" in entry:
            _move_into_place(workspace, home, Path(entry["file"]))
            manifest["files"].pop(entry["file"], None)
        else:
            console.print(f"[yellow]warning:[/] no WECHSEL input {key}: {entry['missing']}", highlight=False)
        section[key] = entry


def _with_english(languages: Sequence[str]) -> tuple[str, ...]:
    ordered = ["en", *(lang.lower() for lang in languages)]
    return tuple(dict.fromkeys(ordered))


def _move_into_place(workspace: Path, home: Path, relative: Path) -> None:
    """Rename ``workspace/relative`` to ``home/relative``, replacing what was there (the old copy goes last)."""
    target = home / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    retired = None
    if target.exists():
        retired = Path(tempfile.mkdtemp(prefix=".retired-", dir=home)) / target.name
        os.rename(target, retired)
    os.rename(workspace / relative, target)
    if retired is not None:
        shutil.rmtree(retired.parent, ignore_errors=True)


def _forget_files(manifest: dict[str, Any], folder: str) -> None:
    prefix = folder.rstrip("/") + "/"
    manifest["files"] = {k: v for k, v in manifest["files"].items() if not k.startswith(prefix)}


def _record_files(manifest: dict[str, Any], home: Path) -> None:
    """Add lines / bytes / sha256 of every model and corpus file not yet in the manifest."""
    folders = [manifest["model"]["dir"]] + [f for entry in manifest["corpora"].values() for f in entry["folders"]]
    recorded = [*manifest.get("lexicons", {}).values(), *manifest.get("word_vectors", {}).values(),
                *manifest.get("dictionaries", {}).values()]
    for entry in recorded:
        if "file" in entry and entry["file"] not in manifest["files"]:
            manifest["files"][entry["file"]] = _describe_file(home / entry["file"])
    for folder in folders:
        for path in sorted((home / folder).rglob("*")):
            relative = path.relative_to(home).as_posix()
            if path.is_file() and relative not in manifest["files"]:
                manifest["files"][relative] = _describe_file(path)


def _describe_file(path: Path) -> dict[str, Any]:
    description: dict[str, Any] = {"bytes": path.stat().st_size, "sha256": file_sha256(path)}
    if path.suffix in {".txt", ".jsonl"}:
        with path.open("rb") as handle:
            description["lines"] = sum(1 for _ in handle)
    return description


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read a MiB at a time."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_manifest(home: Path) -> dict[str, Any] | None:
    path = home / MANIFEST_NAME
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return manifest if manifest.get("format") == MANIFEST_FORMAT else None


def _write_manifest(home: Path, manifest: dict[str, Any]) -> None:
    temporary = home / f".{MANIFEST_NAME}.tmp"
    temporary.write_text(json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(temporary, home / MANIFEST_NAME)


@contextlib.contextmanager
def _build_lock(home: Path) -> Iterator[None]:
    with (home / ".build.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# --- resolving init.options.wechsel -----------------------------------------------------------------------------

WECHSEL_FILE_OPTIONS = ("source_vectors", "target_vectors", "dictionary")


def resolve_wechsel_options(options: dict[str, Any], source_language: str, target_language: str,
                            assets: EmbeddedAssets | None = None) -> dict[str, Any]:
    """``init.options.wechsel`` with each file option left out or 'embedded' replaced by the file `vocadapt assets`
    built (the word models of the two languages, their FreeDict dictionary); a missing one raises a UserError naming
    the fix. Options naming files are checked to exist. Other options pass through."""
    from vocadapt.components.initializers.wechsel import EMBEDDED

    resolved = dict(options)
    wanted = [name for name in WECHSEL_FILE_OPTIONS if resolved.get(name, EMBEDDED) == EMBEDDED]
    for name in WECHSEL_FILE_OPTIONS:
        if name not in wanted and not Path(str(resolved[name])).expanduser().is_file():
            raise UserError(f"init.options.wechsel.{name}: {resolved[name]} does not exist; give an existing file "
                            f"or '{EMBEDDED}' (built by `vocadapt assets`)")
    if not wanted:
        return resolved
    if assets is None:
        assets = load_assets(languages=(target_language,))
    files = {"source_vectors": ("word_vectors", source_language), "target_vectors": ("word_vectors", target_language),
             "dictionary": ("dictionaries", f"{source_language}-{target_language}")}
    for name in wanted:
        section, key = files[name]
        entry = assets.manifest.get(section, {}).get(key)
        if entry is None:
            raise UserError(
                f"init.options.wechsel.{name}: the embedded default under {assets.home} has no {section} for {key}: "
                f"run `vocadapt assets --lang {target_language}` (or name your own file in init.options.wechsel.{name})"
            )
        if "file" not in entry:
            raise UserError(
                f"init.options.wechsel.{name}: `vocadapt assets` could not build the {section} for {key}: "
                f"{entry.get('missing')}. Fix that (apt-get needs network: run `apt-get update`, then "
                f"`vocadapt assets --force`), or name your own file in init.options.wechsel.{name}"
            )
        resolved[name] = str(assets.home / entry["file"])
    return resolved
