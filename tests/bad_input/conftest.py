"""The tiny sharded checkpoint the generated bad-input tests damage or point outputs at, built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bad_input.corrupt_world import build_sharded_model


@pytest.fixture(scope="session")
def sharded(tmp_path_factory, fixture_corpora) -> Path:
    """An untied tiny Llama in shards with an index; ``sharded.parent / "single"`` is the same model unsharded."""
    return build_sharded_model(tmp_path_factory.mktemp("corrupt-world"), Path(fixture_corpora["en.train"]))
