"""GGUF export of every model family's twin (its real tokenizer, one layer, reduced width) after vocadapt
replaced its vocabulary with a small Italian one: llama.cpp's converter writes it, the tokenizer metadata matches,
and llama.cpp tokenizes Italian and English as the adapted tokenizer does and greedy-decodes as transformers."""

from __future__ import annotations

import pytest

from tests.export.test_gguf_export import TEXTS
from tests.export.tiny_gguf_world import adapted_twin, greedy_disagreements, llama_cpp_or_skip
from tests.families.conftest import BYTE_LEVEL, FAMILIES, SENTENCEPIECE

# the name llama.cpp's converter writes for each adapted vocabulary (None: read without one, as SentencePiece);
# "refused": vocadapt's Italian tokenizer trained like Gemma-3's splits words at '▁' (Split, MergedWithNext), where
# Gemma-3's own does not split at all, and llama.cpp has no pre-tokenizer that splits that way
PRE_TOKENIZERS = {"llama3_1": "llama-bpe", "qwen3": "qwen2", "deepseek_v3": "deepseek-v3", "gemma3": "refused",
                  "llama2": None, "mistral_v1": None}


def test_the_byte_level_families_pre_tokenizers_have_llama_cpp_names(family_tokenizers):
    from vocadapt.components.export.gguf import KNOWN_PRE_TOKENIZERS, pre_tokenizer_fingerprint

    names = {family: KNOWN_PRE_TOKENIZERS.get(pre_tokenizer_fingerprint(family_tokenizers[family])[0])
             for family in BYTE_LEVEL}
    assert names == {"llama3_1": "llama-bpe", "qwen3": "qwen2", "deepseek_v3": "deepseek-v3"}


# llama.cpp reads Llama-2's and Mistral's tokenizer.json (byte-fallback BPE) as a SentencePiece vocabulary, merging
# by per-token scores instead of the merge list; on a vocabulary vocadapt trained like theirs its ids differ from
# the tokenizer's a dozen tokens into the first Italian sentence (the leading '▁' already agrees). Not fixed yet.
SCORES_NOT_MERGES = pytest.mark.xfail(strict=True, reason="llama.cpp tokenizes a replaced Llama-2/Mistral "
                                      "vocabulary by scores, not by its merges")


@pytest.mark.parametrize("family", [pytest.param(name, marks=SCORES_NOT_MERGES)
                                    if name in ("llama2", "mistral_v1") else name for name in FAMILIES])
def test_a_replaced_family_twin_exports_and_llama_cpp_agrees(family, family_tokenizers, gguf_converter, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vocadapt.components.errors import UserError
    from vocadapt.components.export.gguf import export_gguf
    from vocadapt.components.export.llama_cpp_checks import load_gguf, token_ids

    kind = "spm-bpe" if family in SENTENCEPIECE else "bytelevel-bpe"
    folder = adapted_twin(family, "replace", tmp_path, kind)
    if PRE_TOKENIZERS[family] == "refused":
        with pytest.raises(UserError, match="llama.cpp has no pre-tokenizer.*MergedWithNext.*nothing was written"):
            export_gguf(folder, tmp_path / "f16.gguf", "f16", gguf_converter)
        assert not (tmp_path / "f16.gguf").exists()
        return
    exported = export_gguf(folder, tmp_path / "f16.gguf", "f16", gguf_converter)  # metadata checked inside
    assert exported.plan.pre_tokenizer == PRE_TOKENIZERS[family]
    llama_cpp_or_skip()
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    llm = load_gguf(exported.path)
    for text in TEXTS:
        assert token_ids(llm, text) == tokenizer.encode(text, add_special_tokens=False), text
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    prompt = ([tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []) + \
        tokenizer.encode(TEXTS[0], add_special_tokens=False)
    assert greedy_disagreements(model, llm, prompt)[1] == []
