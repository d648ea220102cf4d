"""Comments explain the code in place: none cites an item of a list, a ticket or a work log the reader cannot open.

A comment such as "(see item 7 of the pitfalls list)" by number tells a reader of the repository nothing; it must
state the pitfall itself ("checkpoints pad the embedding matrix, so it has rows past the tokenizer's last id").
References to the papers (SAVA §3, "0.01GB" §5) are public and stay.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON_FOLDERS = ("components", "platform", "pipelines", "cli", "dashboards", "benchmarks", "tests")
CONFIG_FOLDERS = ("configs", "infra")

# Built from pieces so that this file does not match its own pattern.
_CITED = ("iss" + "ue", "sess" + "ion", "pit" + "falls?")
CITATION = re.compile(r"\b(?:" + "|".join(_CITED) + r")(?:\s+item)?[\s#_-]*\d", re.IGNORECASE)


def _files() -> list[Path]:
    files = [path for folder in PYTHON_FOLDERS for path in (ROOT / folder).rglob("*.py")]
    for suffix in ("*.yaml", "*.yml"):
        files += [path for folder in CONFIG_FOLDERS for path in (ROOT / folder).rglob(suffix)]
    return sorted(path for path in files if "__pycache__" not in path.parts)


def citations(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line that cites a numbered item nobody can open."""
    return [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1) if CITATION.search(line)]


def test_pattern_catches_the_usual_spellings():
    cited = ["(" + "PITFALLS" + " 7)", "Is" + "sue 3's figures", "sess" + "ion-2 defaults", "(PIT" + "FALLS item 12)"]
    plain = ['@pytest.fixture(scope="' + "sess" + 'ion")', "the " + "iss" + "ue's bar", "SAVA §3.1"]
    assert all(citations(line) for line in cited)
    assert not any(citations(line) for line in plain)


def test_no_comment_cites_a_numbered_item_the_reader_cannot_open():
    files = _files()
    assert any(path.name == "test_comments.py" for path in files)
    offending = [
        f"{path.relative_to(ROOT)}:{number}: {line}"
        for path in files
        for number, line in citations(path.read_text(encoding="utf-8"))
    ]
    assert not offending, "state the reason in place instead of citing a number:\n" + "\n".join(offending)
