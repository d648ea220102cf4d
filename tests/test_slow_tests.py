"""Every entry of tests/slow_tests.py names a test file (and test) that exists: a renamed test would otherwise slip
into `make test-fast` unnoticed."""

from __future__ import annotations

import re
from pathlib import Path

from tests.slow_tests import SLOW_FILES, SLOW_TESTS, is_slow

ROOT = Path(__file__).resolve().parents[1]


def test_every_listed_slow_file_and_test_exists():
    missing = [path for path in SLOW_FILES if not (ROOT / path).is_file()]
    for entry in SLOW_TESTS:
        path, name = entry.split("::")
        if not (ROOT / path).is_file() or not re.search(rf"^def {name}\(", (ROOT / path).read_text(), re.MULTILINE):
            missing.append(entry)
    assert not missing, missing


def test_a_listed_test_is_slow_with_any_parameters_and_a_listed_file_with_every_test():
    test = next(iter(SLOW_TESTS))
    assert is_slow(test) and is_slow(f"{test}[one-parameter]")
    assert is_slow(f"{next(iter(SLOW_FILES))}::test_anything")
    assert not is_slow("tests/test_slow_tests.py::test_every_listed_slow_file_and_test_exists")


def test_the_longest_files_exist_and_come_first_in_their_order():
    from tests.slow_tests import LONGEST_FILES, collection_rank

    assert [path for path in LONGEST_FILES if not (ROOT / path).is_file()] == []
    assert len(set(LONGEST_FILES)) == len(LONGEST_FILES)
    ranks = [collection_rank(f"{path}::test_x[1]") for path in LONGEST_FILES]
    assert ranks == sorted(ranks) and collection_rank("tests/test_layout.py::test_x") == len(LONGEST_FILES)
