"""GGUF export of every model family's twin (its real tokenizer, one layer, reduced width) after vocadapt replaced
its vocabulary with a small Italian one, or expanded its real vocabulary with Italian tokens: llama.cpp's converter
writes it, the tokenizer metadata matches, and llama.cpp tokenizes Italian and English as the adapted tokenizer
does and greedy-decodes as transformers."""

from __future__ import annotations

import pytest

from tests.export.test_gguf_export import TEXTS
from tests.export.tiny_gguf_world import ENGLISH, ITALIAN, adapted_twin, greedy_disagreements, llama_cpp_or_skip
from tests.families.conftest import BYTE_LEVEL, FAMILIES, SENTENCEPIECE

# the name llama.cpp's converter writes for each adapted vocabulary (None: read without one, as SentencePiece);
# "refused": vocadapt's Italian tokenizer trained like Gemma-3's splits words at '▁' (Split, MergedWithNext), where
# Gemma-3's own does not split at all, and llama.cpp has no pre-tokenizer that splits that way
PRE_TOKENIZERS = {
    ("llama3_1", "replace"): "llama-bpe", ("llama3_1", "expand"): "llama-bpe",
    ("qwen3", "replace"): "qwen2", ("qwen3", "expand"): "qwen2",
    # an expanded vocabulary keeps the source's ids on the converter's fixed text, so llama.cpp's own table names
    # it: DeepSeek-V3's tokenizer as fetched hashes to "joyai-llm", which llama.cpp splits as it does "deepseek-v3"
    ("deepseek_v3", "replace"): "deepseek-v3", ("deepseek_v3", "expand"): "joyai-llm",
    # Gemma-3's own pre-tokenizer, kept by expand, is in llama.cpp's table as "granite-embed-multi-311m" (llama.cpp
    # splits it as it does "gemma4")
    ("gemma3", "replace"): "refused", ("gemma3", "expand"): "granite-embed-multi-311m",
    ("llama2", "replace"): None, ("llama2", "expand"): None,
    ("mistral_v1", "replace"): None, ("mistral_v1", "expand"): None,
}


def test_the_byte_level_families_pre_tokenizers_have_llama_cpp_names(family_tokenizers):
    from vocadapt.components.export.gguf import KNOWN_PRE_TOKENIZERS, pre_tokenizer_fingerprint

    names = {family: KNOWN_PRE_TOKENIZERS.get(pre_tokenizer_fingerprint(family_tokenizers[family])[0])
             for family in BYTE_LEVEL}
    assert names == {"llama3_1": "llama-bpe", "qwen3": "qwen2", "deepseek_v3": "deepseek-v3"}


def expected_ids(tokenizer, folder, text: str) -> list[int]:
    """The adapted tokenizer's ids for ``text`` as llama.cpp must give them. One difference is the family's, not
    the export's: a tokenizer.json whose Metaspace prepends '▁' to the start of a text (Llama-2's) skips it when the
    text already begins with a space, where llama.cpp, like SentencePiece, always prepends; there llama.cpp's ids
    are the tokenizer's for the text with one more space in front."""
    from vocadapt.components.export.llama_cpp_converter import _prepends_space

    if text.startswith(" ") and _prepends_space(folder):
        text = " " + text
    return tokenizer.encode(text, add_special_tokens=False)


@pytest.mark.parametrize("mode", ["replace", "expand"])
@pytest.mark.parametrize("family", FAMILIES)
def test_an_adapted_family_twin_exports_and_llama_cpp_agrees(family, mode, family_tokenizers, gguf_converter,
                                                             tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer
    from vocadapt.components.errors import UserError
    from vocadapt.components.export.gguf import export_gguf
    from vocadapt.components.export.llama_cpp_checks import load_gguf, token_ids

    kind = "spm-bpe" if family in SENTENCEPIECE else "bytelevel-bpe"
    folder = adapted_twin(family, mode, tmp_path, kind)
    if PRE_TOKENIZERS[(family, mode)] == "refused":
        with pytest.raises(UserError, match="llama.cpp has no pre-tokenizer.*MergedWithNext.*nothing was written"):
            export_gguf(folder, tmp_path / "f16.gguf", "f16", gguf_converter)
        assert not (tmp_path / "f16.gguf").exists()
        return
    exported = export_gguf(folder, tmp_path / "f16.gguf", "f16", gguf_converter)  # metadata checked inside
    assert exported.plan.pre_tokenizer == PRE_TOKENIZERS[(family, mode)]
    llama_cpp_or_skip()
    assert exported.probes > len(TEXTS)  # llama.cpp's tokenizer was checked before the file was written
    tokenizer = load_pretrained_tokenizer(str(folder))
    llm = load_gguf(exported.path)
    for text in TEXTS + ITALIAN[:5] + ENGLISH[:4]:
        assert token_ids(llm, text) == expected_ids(tokenizer, folder, text), text
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    prompt = ([tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []) + \
        tokenizer.encode(TEXTS[0], add_special_tokens=False)
    assert greedy_disagreements(model, llm, prompt)[1] == []
