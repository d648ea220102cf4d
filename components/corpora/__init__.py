"""Parallel corpora for the embedded default: parsing sources into aligned units and splitting them.

Pure functions, no downloads: ``platform/assets/embedded.py`` fetches the sources and calls these.
"""

from vocadapt.components.corpora.bible import read_bible_verses, align_bible_verses
from vocadapt.components.corpora.language_filter import LanguageFilterResult, keep_language
from vocadapt.components.corpora.libreoffice_help import (
    align_help_paragraphs,
    parse_help_page,
    read_help_tree,
)
from vocadapt.components.corpora.splits import (
    SPLITS,
    AlignedUnit,
    drop_duplicate_texts,
    split_of,
    split_units,
)

__all__ = [
    "SPLITS",
    "AlignedUnit",
    "LanguageFilterResult",
    "align_bible_verses",
    "align_help_paragraphs",
    "drop_duplicate_texts",
    "keep_language",
    "parse_help_page",
    "read_bible_verses",
    "read_help_tree",
    "split_of",
    "split_units",
]
