"""Session fixtures for the initialiser tests, built from tests/initializers/tiny_world.py."""

from __future__ import annotations

import os

import pytest

from tests.initializers.tiny_world import ITALIAN, ENGLISH, bytelevel_tokenizer, expand_bpe, synthetic_lines

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def english_lines() -> list[str]:
    return synthetic_lines(ENGLISH, 300, seed=1)


@pytest.fixture(scope="session")
def italian_lines() -> list[str]:
    return synthetic_lines(ITALIAN, 300, seed=2)


@pytest.fixture(scope="session")
def source_tokenizer(english_lines):
    return bytelevel_tokenizer(english_lines + ITALIAN[:1], vocab_size=300)


@pytest.fixture(scope="session")
def target_tokenizer(italian_lines):
    return bytelevel_tokenizer(italian_lines, vocab_size=320)


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory, italian_lines) -> str:
    path = tmp_path_factory.mktemp("corpus") / "italian.txt"
    path.write_text("\n".join(italian_lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="session")
def fasttext_helper(target_tokenizer, corpus_file):
    from vocadapt.components.helpers import resolve_helper

    return resolve_helper("fasttext:dim=16,epoch=2", target_tokenizer=target_tokenizer, corpus_files=[corpus_file])


@pytest.fixture(scope="session")
def expanded_tokenizer(source_tokenizer, target_tokenizer):
    return expand_bpe(source_tokenizer, target_tokenizer)
