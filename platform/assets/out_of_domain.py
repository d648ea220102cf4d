"""Out-of-domain held-out text: Debian's fortune cookies, a source no vocadapt model trains on.

A held-out split of the training corpora (LibreOffice help, Bibles) flatters an adapted model: a few LAPT steps on
help pages and verses teach their style, and the held-out paragraphs share it. Quality claims must also hold on text
from elsewhere. Debian's ``fortunes-it`` (quotes, jokes, definitions, "leggi di Murphy") and ``fortunes`` (English
quotes and sayings, the inoffensive set) are prose of another register and era, reachable offline through
``apt-get download`` like the other embedded text; ``fortunes-de`` (quotes, sayings, anecdotes) and ``fortunes-ru``
(quotes and sayings by theme) give German and Russian the same.

``out_of_domain_documents(lang)`` returns up to ``limit`` cookies (attribution lines dropped, one paragraph each, at
least ``min_words`` words, labelled as the language by fastText's lid), in a seeded order; the files are built once
under ``<vocadapt home>/out-of-domain/<lang>.txt``.

Which text a run scores is declared per language (``evaluation.out_of_domain_text``): the fortunes, or files from
another source. :func:`out_of_domain_for_config` resolves it for every target language (the streams ``target``,
``target_<code>`` for each further one of ``target.languages``) and the source language;
``pipelines/preflight.py`` refuses a run whose out-of-domain paragraphs overlap its training text.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import tempfile
from pathlib import Path

from vocadapt.components.errors import UserError
from vocadapt.platform.assets.builders import _apt_download, _cached_deb
from vocadapt.platform.assets.embedded import vocadapt_home

# package, folder under usr/share/games/fortunes, the cookie files read (prose; no ASCII art, no banners)
SOURCES = {
    "it": ("fortunes-it", "it", ("italia", "computer", "definizioni", "leggi", "norm", "formiche", "luttazzi",
                                 "paolotedeschi", "zuse", "adams", "itatrek", "luke")),
    "en": ("fortunes", "", ("wisdom", "people", "work", "education", "science", "humorists", "politics", "law",
                            "love", "medicine", "pets", "food", "sports", "platitudes", "literature", "miscellaneous")),
    "de": ("fortunes-de", "de", ("zitate", "sprueche", "sprichworte", "anekdoten", "witze", "murphy", "wusstensie",
                                 "regeln", "letzteworte", "stilblueten", "kinderzitate", "mathematiker", "computer")),
    "ru": ("fortunes-ru", "ru", ("citates", "knowledge", "life", "murphy", "work", "education", "friendship",
                                 "wealth", "time", "truth", "success", "war", "future", "happy", "genious")),
}
_ATTRIBUTION = re.compile(r"^\s*(--|—)\s")


def out_of_domain_documents(lang: str, *, limit: int = 256, min_words: int = 8, seed: int = 0,
                            home: Path | None = None) -> list[str]:
    """Up to ``limit`` out-of-domain paragraphs in ``lang`` (see the module doc); UserError when unavailable."""
    path = out_of_domain_file(lang, home=home)
    documents = [line for line in path.read_text(encoding="utf-8").splitlines() if len(line.split()) >= min_words]
    random.Random(seed).shuffle(documents)
    return documents[:limit]


def declared_source(evaluation, lang: str) -> str | list[str] | None:
    """What ``evaluation.out_of_domain_text`` declares for ``lang``: "fortunes", a list of files, or None (no
    out-of-domain text: undeclared and Debian has no fortunes in it)."""
    declared = evaluation.out_of_domain_text.get(lang)
    if declared is not None:
        return declared
    return "fortunes" if lang in SOURCES else None


def out_of_domain_streams(config) -> list[tuple[str, str]]:
    """(stream, language) of every language a run scores out of domain: ``target`` (the first target language),
    ``target_<code>`` for each further one of target.languages, ``source``. The metrics are ``bpb_ood_<stream>``."""
    from vocadapt.components.training.settings import language_stream

    primary = config.target.language
    further = [(language_stream(lang, primary), lang) for lang in (config.target.languages or [primary])[1:]]
    return [("target", primary), *further, ("source", config.target.source_language)]


def languages_without_out_of_domain(config) -> list[str]:
    """The target languages with no out-of-domain text: not declared in ``evaluation.out_of_domain_text`` and no
    Debian fortunes in them."""
    return [lang for stream, lang in out_of_domain_streams(config)
            if stream != "source" and declared_source(config.evaluation, lang) is None]


def out_of_domain_for_config(config) -> dict[str, list[str]]:
    """{"target": paragraphs, "target_<code>": ..., "source": paragraphs} the run scores out of domain, for each
    stream whose language has out-of-domain text ({} with ``evaluation.out_of_domain: false``); UserError for
    unusable declarations."""
    evaluation = config.evaluation
    if not evaluation.out_of_domain:
        return {}
    documents = {}
    for stream, lang in out_of_domain_streams(config):
        source = declared_source(evaluation, lang)
        if source is None:
            continue
        if source == "fortunes":
            if lang not in SOURCES:
                raise UserError(f"evaluation.out_of_domain_text.{lang}: Debian has no fortunes in {lang!r} (only "
                                f"{', '.join(sorted(SOURCES))}); list files of {lang} text from a source no "
                                "training saw instead")
            documents[stream] = out_of_domain_documents(lang, limit=evaluation.out_of_domain_documents,
                                                        seed=config.seed)
        else:
            documents[stream] = _documents_from_files(source, lang, limit=evaluation.out_of_domain_documents,
                                                      seed=config.seed)
    return documents


def _documents_from_files(files: list[str], lang: str, *, limit: int, seed: int) -> list[str]:
    missing = [name for name in files if not Path(name).is_file()]
    if missing or not files:
        raise UserError(f"evaluation.out_of_domain_text.{lang}: {missing or 'no files'} "
                        f"{'do not exist' if missing else 'given'}; list existing text files (one paragraph per "
                        "line), or 'fortunes'")
    documents = []
    for name in files:
        try:
            text = Path(name).read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            raise UserError(f"evaluation.out_of_domain_text.{lang}: {name} is not UTF-8 text ({error.reason} at "
                            f"byte {error.start}); convert it to UTF-8") from error
        documents.extend(line.strip() for line in text.splitlines() if line.strip())
    if not documents:
        raise UserError(f"evaluation.out_of_domain_text.{lang}: {', '.join(files)} hold no text; give paragraphs, "
                        "one per line")
    random.Random(seed).shuffle(documents)
    return documents[:limit]


def out_of_domain_file(lang: str, *, home: Path | None = None) -> Path:
    """``<home>/out-of-domain/<lang>.txt``, built from the Debian package on first use."""
    if lang not in SOURCES:
        raise UserError(f"no out-of-domain text for {lang!r}: vocadapt knows Debian fortunes for "
                        f"{', '.join(sorted(SOURCES))}; set evaluation.out_of_domain: false for other languages")
    home = home or vocadapt_home()
    target = home / "out-of-domain" / f"{lang}.txt"
    if target.is_file():
        return target
    package, folder, files = SOURCES[lang]
    debs = home / "downloads" / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    if _cached_deb(debs, package) is None:
        problem = _apt_download([package], debs)
        if problem:
            raise UserError(f"could not download the Debian package {package} for out-of-domain {lang} text "
                            f"({problem}): run `apt-get update` with network, or set evaluation.out_of_domain: false")
    with tempfile.TemporaryDirectory(dir=debs) as scratch:
        subprocess.run(["dpkg-deb", "-x", str(_cached_deb(debs, package)), scratch], check=True, capture_output=True)
        root = Path(scratch, "usr", "share", "games", "fortunes", folder)
        cookies = [cookie for name in files if (root / name).is_file() for cookie in _cookies(root / name)]
    cookies = _in_language(list(dict.fromkeys(cookies)), lang)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_suffix(".tmp")
    staging.write_text("".join(f"{cookie}\n" for cookie in cookies), encoding="utf-8")
    os.replace(staging, target)
    return target


def _cookies(path: Path) -> list[str]:
    """Each cookie of a fortune file as one line: attribution lines dropped, whitespace collapsed."""
    utf8 = path.with_name(path.name + ".u8")
    raw = utf8.read_bytes() if utf8.is_file() else path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    cookies = []
    for block in re.split(r"\n%\n", text.replace("\r\n", "\n")):
        lines = [line for line in block.splitlines() if line.strip() and not _ATTRIBUTION.match(line)]
        cookie = " ".join(" ".join(lines).split())
        if cookie and cookie != "%":
            cookies.append(cookie)
    return cookies


def _in_language(cookies: list[str], lang: str) -> list[str]:
    """The cookies fastText's lid labels as ``lang`` (Italian fortunes quote English and dialect too)."""
    from vocadapt.components.language_id import fasttext_label, identify_languages

    labels = identify_languages(cookies)
    wanted = fasttext_label(lang)
    return [cookie for cookie, label in zip(cookies, labels) if label == wanted]
