"""Fixtures of the GGUF export tests: two tiny Llamas whose byte-level tokenizers vocadapt adapted to Italian
(replace and expand), llama.cpp's converter (fetched once per machine, like the families' tokenizers) and the
GGUFs it writes of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.export.tiny_gguf_world import ENGLISH, ITALIAN, SPECIALS, llama_cpp_or_skip, tiny_llama
from tests.families.conftest import family_tokenizers  # noqa: F401 (fixture: the families' real tokenizers)


@pytest.fixture(scope="session")
def tiny_adapted_models(tmp_path_factory) -> dict[str, Path]:
    """{"replace": folder, "expand": folder}: tiny Llamas whose tokenizers vocadapt adapted to Italian."""
    from vocadapt.components.tokenizers.expand import expand_with_target
    from vocadapt.components.tokenizers.replace import replace_vocabulary
    from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, train_tokenizer_from_iterator

    root = tmp_path_factory.mktemp("gguf-world")
    source = train_tokenizer_from_iterator(ENGLISH, TokenizerTrainingSpec("bytelevel-bpe", 300, special_tokens=SPECIALS),
                                           root / "source-tokenizer", show_progress=False)
    target_spec = TokenizerTrainingSpec("bytelevel-bpe", 360, special_tokens=SPECIALS, like=source)
    target = train_tokenizer_from_iterator(ITALIAN, target_spec, root / "target-tokenizer", show_progress=False)
    replaced = replace_vocabulary(source, target).tokenizer
    expanded = expand_with_target(source, target).tokenizer
    return {"replace": tiny_llama(replaced, root / "replace", seed=1),
            "expand": tiny_llama(expanded, root / "expand", seed=2)}


@pytest.fixture(scope="session")
def gguf_converter() -> Path:
    from vocadapt.platform.serving.gguf_export import converter_dir

    return converter_dir()


@pytest.fixture(scope="session")
def tiny_ggufs(tiny_adapted_models, gguf_converter, tmp_path_factory) -> dict[tuple[str, str], Path]:
    """{(mode, "f16"): GGUF} for replace and expand, written by llama.cpp's converter."""
    from vocadapt.components.export.gguf import export_gguf

    out = tmp_path_factory.mktemp("ggufs")
    return {(mode, "f16"): export_gguf(folder, out / f"{mode}-f16.gguf", "f16", gguf_converter).path
            for mode, folder in tiny_adapted_models.items()}


@pytest.fixture(scope="session")
def tiny_quantized(tiny_ggufs) -> dict[str, Path]:
    """{quant: GGUF} of the expand model at f16, q8_0 and q4_k_m (llama.cpp's quantiser)."""
    from vocadapt.components.export.gguf import quantize_gguf

    llama_cpp_or_skip()
    f16 = tiny_ggufs[("expand", "f16")]
    files = {"f16": f16}
    for quant in ("q8_0", "q4_k_m"):
        files[quant] = f16.with_name(f"expand-{quant}.gguf")
        quantize_gguf(f16, files[quant], quant)
    return files
