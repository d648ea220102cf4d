"""Parsing the help pages and the Bible database into aligned units, on tiny inputs built here."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from vocadapt.components.corpora import (
    align_bible_verses,
    align_help_paragraphs,
    parse_help_page,
    read_bible_verses,
    read_help_tree,
)

PAGE_EN = """<!DOCTYPE html><html><head><title>Options</title><script>var x = "<p id='par_id9'>no</p>";</script></head>
<body><div id="DisplayArea">
  <h1 id="hd_id1" dir="auto">Load/Save   Options</h1>
  <p id="par_id2" class="paragraph">Choose <span class="switchinline"><span hidden="true" class="MAC">LibreOffice -
  Preferences</span><span class="default">Tools - Options</span></span>.<br>Then click.</p>
  <table><tr><td id="par_id3">Cell <p id="par_id4">inner paragraph</p> tail</td></tr></table>
  <p id="par_id5">   </p>
  <p id="par_id6">Only in English</p>
  <p id="par_id7">Ctrl+C</p>
  <p id="other">not a paragraph id</p>
  <p id="par_id2">second use of an id</p>
</div></body></html>"""

PAGE_IT = PAGE_EN
for english, italian in [
    ("Load/Save   Options", "Opzioni Carica/Salva"),
    ("Only in English", ""),
    ("Tools - Options", "Strumenti - Opzioni"),
    ("Choose", "Scegliete"),
    ("Then click.", "Poi fate clic."),
]:
    PAGE_IT = PAGE_IT.replace(english, italian)


def test_page_paragraphs_by_id_whitespace_collapsed_hidden_and_script_skipped():
    paragraphs = parse_help_page(PAGE_EN)
    assert paragraphs == {
        "hd_id1": "Load/Save Options",
        "par_id2": "Choose Tools - Options.Then click.",
        "par_id3": "Cell tail",
        "par_id4": "inner paragraph",
        "par_id6": "Only in English",
        "par_id7": "Ctrl+C",
        "par_id2#2": "second use of an id",
    }
    assert list(paragraphs)[:2] == ["hd_id1", "par_id2"]  # page order


def _help_tree(root: Path, language: str, html: str) -> Path:
    page = root / language / "text" / "shared" / "optionen" / "01020000.html"
    page.parent.mkdir(parents=True)
    page.write_text(html, encoding="utf-8")
    return root / language


def test_tree_keys_pages_relative_so_languages_align(tmp_path):
    english = read_help_tree(_help_tree(tmp_path, "en-US", PAGE_EN))
    italian = read_help_tree(_help_tree(tmp_path, "it", PAGE_IT))
    key = ("text/shared/optionen/01020000.html", "hd_id1")
    assert english[key] == "Load/Save Options" and italian[key] == "Opzioni Carica/Salva"

    units = align_help_paragraphs({"en": english, "it": italian})
    by_id = {unit.key.split("#", 1)[1]: unit for unit in units}
    # par_id6 is empty in Italian (absent), par_id3/4/7 and the repeated id are untranslated (identical): left out.
    assert set(by_id) == {"hd_id1", "par_id2"}
    assert by_id["par_id2"].texts == {
        "en": "Choose Tools - Options.Then click.",
        "it": "Scegliete Strumenti - Opzioni.Poi fate clic.",
    }
    assert by_id["hd_id1"].key == "libreoffice-help:text/shared/optionen/01020000.html#hd_id1"
    assert [u.key for u in units] == sorted(u.key for u in units)


def test_untranslated_paragraphs_kept_when_asked(tmp_path):
    english = read_help_tree(_help_tree(tmp_path, "en-US", PAGE_EN))
    italian = read_help_tree(_help_tree(tmp_path, "it", PAGE_IT))
    assert len(align_help_paragraphs({"en": english, "it": italian}, untranslated_from=None)) == 6


def test_tree_without_pages_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no help pages"):
        read_help_tree(tmp_path)


def _bible_database(path: Path) -> Path:
    connection = sqlite3.connect(path)
    connection.execute(
        "CREATE TABLE bible (id INTEGER, bbName TEXT, bNumber INTEGER, cNumber INTEGER, vNumber INTEGER, vText TEXT)"
    )
    rows = [
        ("4", 1, 1, 1, "In the beginning God  created the heavens."),
        ("4", 1, 1, 2, "first -[fruits] offering"),
        ("4", 1, 1, 3, "Only in English."),
        ("d", 1, 1, 1, "NEL principio Iddio creò il cielo."),
        ("d", 1, 1, 2, "offerta\tdi primizie"),
        ("d", 1, 1, 3, "   "),
        ("d", 43, 3, 16, "Perciocchè Iddio ha tanto amato il mondo."),
    ]
    connection.executemany("INSERT INTO bible VALUES (0, ?, ?, ?, ?, ?)", rows)
    connection.commit()
    connection.close()
    return path


def test_bible_verses_cleaned_and_aligned_by_number(tmp_path):
    database = _bible_database(tmp_path / "bible.db")
    english = read_bible_verses(database, "4")
    italian = read_bible_verses(database, "d")
    assert english[(1, 1, 2)] == "first -fruits offering"  # editorial brackets removed
    assert english[(1, 1, 1)] == "In the beginning God created the heavens."
    assert (1, 1, 3) not in italian  # blank verse left out
    units = align_bible_verses({"en": english, "it": italian}, "bible-diodati")
    assert [u.key for u in units] == ["bible-diodati:01.001.001", "bible-diodati:01.001.002"]
    assert units[1].texts == {"en": "first -fruits offering", "it": "offerta di primizie"}


def test_missing_bible_database_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="Bible database not found"):
        read_bible_verses(tmp_path / "absent.db", "d")
