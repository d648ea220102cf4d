"""Paragraph-aligned text from the LibreOffice help pages (Debian packages ``libreoffice-help-<lang>``).

Every language's help has the same pages (``text/<module>/<...>.html``) and marks each heading and paragraph with the
same ``id`` (``par_id3146957``, ``hd_id3147291``), so (page, id) aligns a paragraph across languages.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from html.parser import HTMLParser
from pathlib import Path

from vocadapt.components.corpora.splits import AlignedUnit

ParagraphKey = tuple[str, str]  # (page path relative to the language folder, paragraph id)

_PARAGRAPH_ID = re.compile(r"^(par|hd)_id\w*$")
_SPACES = re.compile(r"\s+")
_VOID_ELEMENTS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "wbr"}
_SKIPPED_ELEMENTS = {"script", "style", "noscript", "head"}


class _ParagraphCollector(HTMLParser):
    """Collects the text of each element whose id is a paragraph id.

    Text goes to the innermost open paragraph only, so a table cell holding a paragraph does not repeat it. Elements
    marked ``hidden`` hold the alternatives for other systems (the macOS menu names) and are skipped.
    """

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paragraphs: dict[str, list[str]] = {}
        self._open: list[tuple[str, str | None, bool]] = []  # (tag, paragraph id or None, skipped)

    def _skipping(self) -> bool:
        return any(skipped for _, _, skipped in self._open)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID_ELEMENTS:
            return
        attributes = dict(attrs)
        skipped = tag in _SKIPPED_ELEMENTS or "hidden" in attributes
        element_id = attributes.get("id") or ""
        paragraph_id = None
        if _PARAGRAPH_ID.match(element_id) and not self._skipping() and not skipped:
            paragraph_id = element_id
            occurrence = 2
            while paragraph_id in self.paragraphs:  # an id repeated on one page: keep each, numbered in order
                paragraph_id = f"{element_id}#{occurrence}"
                occurrence += 1
            self.paragraphs[paragraph_id] = []
        self._open.append((tag, paragraph_id, skipped))

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self._open) - 1, -1, -1):  # tolerate unclosed inner elements
            if self._open[depth][0] == tag:
                del self._open[depth:]
                return

    def handle_data(self, data: str) -> None:
        if self._skipping():
            return
        for _, paragraph_id, _ in reversed(self._open):
            if paragraph_id is not None:
                self.paragraphs[paragraph_id].append(data)
                return


def parse_help_page(html: str) -> dict[str, str]:
    """{paragraph id: text} of one help page, whitespace collapsed, empty paragraphs left out, in page order."""
    collector = _ParagraphCollector()
    collector.feed(html)
    collector.close()
    texts = {}
    for paragraph_id, pieces in collector.paragraphs.items():
        text = _SPACES.sub(" ", "".join(pieces)).strip()
        if text:
            texts[paragraph_id] = text
    return texts


def read_help_tree(
    language_folder: Path, track: Callable[[list[Path]], Iterable[Path]] = iter
) -> dict[ParagraphKey, str]:
    """{(page, paragraph id): text} for every ``text/**/*.html`` page under one language's help folder.

    ``language_folder`` is e.g. ``usr/share/libreoffice/help/it``; pages are keyed relative to it, so the same page
    of another language has the same key. ``track`` wraps the page list (a progress bar).
    """
    language_folder = Path(language_folder)
    pages = sorted((language_folder / "text").rglob("*.html"))
    if not pages:
        raise FileNotFoundError(f"no help pages under {language_folder / 'text'}")
    paragraphs = {}
    for page in track(pages):
        relative = page.relative_to(language_folder).as_posix()
        for paragraph_id, text in parse_help_page(page.read_text(encoding="utf-8")).items():
            paragraphs[(relative, paragraph_id)] = text
    return paragraphs


def align_help_paragraphs(
    paragraphs_by_language: Mapping[str, Mapping[ParagraphKey, str]],
    source: str = "libreoffice-help",
    untranslated_from: str | None = "en",
) -> list[AlignedUnit]:
    """One unit per (page, id) present in every language, keyed ``<source>:<page>#<id>``, in key order.

    With ``untranslated_from`` set, a paragraph whose text in another language equals its text in that language is
    left out: it was never translated (or is code, a name, a number), so it says nothing about the target language.
    """
    languages = list(paragraphs_by_language)
    shared = set.intersection(*(set(p) for p in paragraphs_by_language.values())) if languages else set()
    units = []
    for page, paragraph_id in sorted(shared):
        texts = {language: paragraphs_by_language[language][(page, paragraph_id)] for language in languages}
        if untranslated_from in texts and any(
            texts[language] == texts[untranslated_from] for language in languages if language != untranslated_from
        ):
            continue
        units.append(AlignedUnit(key=f"{source}:{page}#{paragraph_id}", source=source, texts=texts))
    return units
