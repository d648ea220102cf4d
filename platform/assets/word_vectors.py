"""WECHSEL's inputs in the embedded default: small fastText word models of English and each target language, trained
on the embedded training corpora, and English<TAB>target dictionaries built from Debian's FreeDict packages.

Layout under ``$VOCADAPT_HOME``::

    word_vectors/<lang>.bin              fastText skip-gram (dim 100) on corpora/<lang>/train.txt, split into words
    dictionaries/en-<lang>.txt           English<TAB>target word pairs from dict-freedict-eng-<x> and -<x>-eng

``vocadapt.platform.assets.embedded`` decides what to build and moves the results into place; everything here writes only
inside the workspace (or the download cache) it is given. A dictionary that cannot be downloaded (no apt, no
network) is recorded as missing with the reason, like the word lists; :func:`vocadapt.platform.assets.embedded.resolve_wechsel_options`
then names the fix. The published vectors (``cc.en.300.bin``) and the authors' dictionaries work too: name them in
``init.options.wechsel``.
"""

from __future__ import annotations

import gzip
import re
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console


# fastText skip-gram, one thread and a seed (same corpus, same bytes): dim 100 as the authors' train_embeddings,
# 3 epochs to stay near a minute per language on 2 cores (the authors train cbow for 20 epochs on far more text).
# 100,000 n-gram buckets instead of fastText's 2 million keep a model near 45 MB instead of 810 MB.
WORD_VECTOR_SETTINGS = {"model": "skipgram", "dim": 100, "epoch": 3, "minCount": 3, "minn": 3, "maxn": 6, "ws": 5,
                        "bucket": 100_000}
WORD_VECTOR_SEED = 0
# Bumped when the way dictionaries are read changes, so that `vocadapt assets` rebuilds older ones.
DICTIONARY_FORMAT = 2
_WORDS = re.compile(r"\w+|[^\w\s]")

# ISO 639-1 -> the ISO 639-3 code of FreeDict's package names (dict-freedict-eng-ita, dict-freedict-ita-eng).
FREEDICT_CODES = {
    "it": "ita", "de": "deu", "fr": "fra", "es": "spa", "pt": "por", "nl": "nld", "sv": "swe", "pl": "pol",
    "ru": "rus", "cs": "ces", "da": "dan", "el": "ell", "fi": "fin", "hu": "hun", "tr": "tur", "hi": "hin",
    "ja": "jpn", "ga": "gle", "hr": "hrv", "la": "lat", "lt": "lit", "sr": "srp", "sw": "swh", "cy": "cym",
    "af": "afr", "ar": "ara", "bg": "bul", "eo": "epo", "is": "isl", "ko": "kor", "zh": "zho",
}
_DICTD_DIGITS = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}
_SENSE_NUMBER = re.compile(r"^\d+\.\s*")
_PARENTHESES = re.compile(r"\([^)]*\)|\[[^\]]*\]|\{[^}]*\}|<[^>]*>")


# --- fastText word models -----------------------------------------------------------------------------------------


def word_vectors_relative(lang: str) -> Path:
    return Path("word_vectors") / f"{lang}.bin"


def build_word_vectors(lang: str, corpus: Path, workspace: Path, console: Console) -> dict[str, Any]:
    """Train ``word_vectors/<lang>.bin`` into ``workspace`` from ``corpus`` (one document per line), split into words
    and punctuation; returns the manifest entry, or ``{"missing": why}`` when fastText cannot train on it."""
    relative = word_vectors_relative(lang)
    (workspace / relative).parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=workspace) as scratch:
        words_file = Path(scratch) / "words.txt"
        tokens = write_words(corpus, words_file)
        with console.status(f"fastText word vectors ({lang}, {tokens:,} words, about a minute)"):
            try:
                model = train_word_model(words_file)
            except RuntimeError as error:  # fastText stops with "Encountered NaN" when its training diverges
                return {"missing": f"fastText could not train on {corpus} ({error})"}
        model.save_model(str(workspace / relative))
    console.print(f"word vectors {lang}: {len(model.words):,} words, dim {model.get_dimension()}", highlight=False)
    return {
        "file": relative.as_posix(), "words": len(model.words), "corpus_tokens": tokens,
        "settings": word_vector_settings(),
        "origin": f"fastText trained on corpora/{lang}/train.txt",
    }


def word_vector_settings() -> dict[str, Any]:
    """What a word model is trained with, as recorded in the manifest (a model built otherwise is rebuilt)."""
    return {**WORD_VECTOR_SETTINGS, "seed": WORD_VECTOR_SEED, "thread": 1}


def write_words(corpus: Path, out: Path) -> int:
    """The corpus as lines of space-separated words and punctuation; returns the number of tokens."""
    count = 0
    with corpus.open(encoding="utf-8") as source, out.open("w", encoding="utf-8") as target:
        for line in source:
            words = _WORDS.findall(line)
            if words:
                target.write(" ".join(words) + "\n")
                count += len(words)
    return count


def train_word_model(words_file: Path, seed: int = WORD_VECTOR_SEED, **overrides: Any) -> Any:
    """fastText on ``words_file`` with :data:`WORD_VECTOR_SETTINGS`, one thread and ``seed`` (the fastText helper's
    seeded trainer)."""
    from vocadapt.components.helpers.fasttext_helper import train_seeded_fasttext

    return train_seeded_fasttext(str(words_file), seed=seed, **{**WORD_VECTOR_SETTINGS, **overrides})


# --- FreeDict dictionaries ----------------------------------------------------------------------------------------


def dictionary_relative(lang: str) -> Path:
    return Path("dictionaries") / f"en-{lang}.txt"


def freedict_packages(lang: str) -> list[tuple[str, bool]]:
    """(Debian package, whether it runs English -> ``lang``) for the two FreeDict directions."""
    code = FREEDICT_CODES.get(lang)
    return [] if code is None else [(f"dict-freedict-eng-{code}", True), (f"dict-freedict-{code}-eng", False)]


def build_dictionary(lang: str, downloads: Path, workspace: Path, console: Console) -> dict[str, Any]:
    """Write ``dictionaries/en-<lang>.txt`` (English<TAB>target, one pair per line, sorted, unique) into ``workspace``
    from whichever FreeDict packages between English and ``lang`` Debian has; returns the manifest entry, or
    ``{"missing": why}`` when none can be downloaded."""
    from vocadapt.platform.assets import builders as asset_builders

    packages = freedict_packages(lang)
    if not packages:
        return {"missing": f"vocadapt knows no FreeDict package between English and {lang!r}"}
    debs = downloads / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    problems = []
    for name, _ in packages:  # one at a time: a direction Debian lacks must not stop the other
        if asset_builders._cached_deb(debs, name) is None:
            with console.status(f"apt-get download {name}"):
                problem = asset_builders._apt_download([name], debs)
            if problem:
                problems.append(f"{name}: {problem}")
    pairs: set[tuple[str, str]] = set()
    versions = []
    for name, english_first in packages:
        deb = asset_builders._cached_deb(debs, name)
        if deb is None:
            continue
        with tempfile.TemporaryDirectory(dir=workspace) as scratch:
            asset_builders.subprocess.run(["dpkg-deb", "-x", str(deb), scratch], check=True, capture_output=True)
            for index in sorted(Path(scratch, "usr", "share", "dictd").glob("*.index")):
                data = gzip.decompress(index.with_name(index.name[: -len(".index")] + ".dict.dz").read_bytes())
                for headword, translation in dictd_pairs(index.read_text(encoding="utf-8"), data):
                    pairs.add((headword, translation) if english_first else (translation, headword))
        versions.append(f"{name} {asset_builders._deb_field(deb, 'Version')}")
    if not pairs:
        why = "; ".join(problems) or "the packages hold no single-word pairs"
        return {"missing": f"no FreeDict dictionary between English and {lang} ({why})"}
    relative = dictionary_relative(lang)
    (workspace / relative).parent.mkdir(parents=True, exist_ok=True)
    (workspace / relative).write_text("".join(f"{en}\t{other}\n" for en, other in sorted(pairs)), encoding="utf-8")
    console.print(f"dictionary en-{lang}: {len(pairs):,} pairs from {', '.join(versions)}", highlight=False)
    return {
        "file": relative.as_posix(), "pairs": len(pairs), "packages": versions, "format": DICTIONARY_FORMAT,
        "licence": "FreeDict (GPL-2.0-or-later; see /usr/share/doc/<package>/copyright)",
        "origin": "Debian, apt-get download",
    }  # fmt: skip


def dictd_number(text: str) -> int:
    """A dictd index number (base 64, most significant digit first: ``C6q`` -> 12,202)."""
    value = 0
    for character in text:
        value = value * 64 + _DICTD_DIGITS[character]
    return value


def dictd_pairs(index: str, data: bytes) -> list[tuple[str, str]]:
    """(headword, translation) pairs of a dictd database: for each entry of the index (headword, offset, length into
    the uncompressed ``data``), the first translation of each sense, kept where headword and translation are single
    words. FreeDict entries are a headword line (with its pronunciation) and one line per sense, numbered or not, with
    translations separated by commas. The headword is read from the entry, whose case the index does not keep."""
    pairs = []
    for line in index.splitlines():
        parts = line.split("\t")
        if len(parts) != 3 or parts[0].startswith("00database") or parts[0].startswith("00-database"):
            continue
        body = data[dictd_number(parts[1]) : dictd_number(parts[1]) + dictd_number(parts[2])].decode("utf-8", "ignore")
        lines = body.splitlines()
        headword = lines[0].split(" /")[0].strip() if lines else ""
        if not _single_word(headword):
            continue
        for sense in lines[1:]:
            first = _PARENTHESES.sub("", _SENSE_NUMBER.sub("", sense.strip())).split(",")[0].split(";")[0].strip()
            if _single_word(first):
                pairs.append((headword, first))
    return pairs


def _single_word(text: str) -> bool:
    return bool(text) and re.fullmatch(r"\w+(?:[-'’]\w+)*", text) is not None and not text.isdigit()
