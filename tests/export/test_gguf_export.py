"""GGUF export of tiny adapted Llamas (replace and expand), checked by llama.cpp itself through llama-cpp-python:
its token ids, its first 32 greedy tokens at f16, and the bits per byte its quantisations lose."""

from __future__ import annotations

import pytest

from tests.export.tiny_gguf_world import ENGLISH, ITALIAN, greedy_disagreements, llama_cpp_or_skip

TEXTS = [
    "La città di Roma è la capitale d'Italia; perché piove così tanto a novembre?",
    "Nel 2024 abbiamo letto 365 pagine, più di mille parole: è già qualcosa!",
    "The quick brown fox jumps over the lazy dog, doesn't it? 42 times.",
    "  spazi   doppi\te tabulazioni\n\nnuove righe — e «virgolette» àèìòù ÀÈÌÒÙ",
]
# The bits per byte each quantisation may add to f16's on the tiny expand model (measured at 1099502: f16 5.2422,
# q8_0 5.2427, q4_k_m 5.2430; the embedded default's figures are in BENCHMARKS.md "GGUF export")
BPB_LOSS_BOUND = {"q8_0": 0.005, "q4_k_m": 0.02}


@pytest.mark.parametrize("mode", ["replace", "expand"])
def test_tokenizer_metadata_matches_the_adapted_tokenizer(mode, tiny_adapted_models, tiny_ggufs):
    from transformers import AutoTokenizer

    from vocadapt.components.export.gguf import tokenizer_mismatches

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_adapted_models[mode]))
    assert tokenizer_mismatches(tiny_ggufs[(mode, "f16")], tokenizer) == []
    other = "expand" if mode == "replace" else "replace"
    assert tokenizer_mismatches(tiny_ggufs[(other, "f16")], tokenizer)  # the check sees another vocabulary


@pytest.mark.parametrize("mode", ["replace", "expand"])
def test_llama_cpp_tokenizes_as_the_adapted_tokenizer(mode, tiny_adapted_models, tiny_ggufs):
    from transformers import AutoTokenizer

    from vocadapt.components.export.llama_cpp_checks import load_gguf, token_ids

    llama_cpp_or_skip()
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_adapted_models[mode]))
    llm = load_gguf(tiny_ggufs[(mode, "f16")])
    for text in TEXTS + ITALIAN[:5] + ENGLISH[:4]:
        assert token_ids(llm, text) == tokenizer.encode(text, add_special_tokens=False), text


@pytest.mark.parametrize("mode", ["replace", "expand"])
def test_llama_cpp_greedy_decodes_as_transformers_at_f16(mode, tiny_adapted_models, tiny_ggufs):
    """Every one of the 32 steps: llama.cpp's arg-max on transformers' greedy path is transformers' token, or tied
    with it at f16 (free-running, one tie taken the other way would change every later token)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vocadapt.components.export.llama_cpp_checks import greedy_tokens, load_gguf

    llama_cpp_or_skip()
    folder = tiny_adapted_models[mode]
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    llm = load_gguf(tiny_ggufs[(mode, "f16")])
    exact = 0
    for text in TEXTS:
        prompt = [tokenizer.bos_token_id] + tokenizer.encode(text, add_special_tokens=False)
        expected, problems = greedy_disagreements(model, llm, prompt)
        assert problems == [], (text, problems)
        exact += greedy_tokens(llm, prompt, 32) == expected
    print(f"{mode}: llama.cpp's free-running greedy tokens equal transformers' on {exact} of {len(TEXTS)} prompts")
    assert exact >= len(TEXTS) - 1


def test_quantisations_stay_within_the_stated_bits_per_byte_of_f16(tiny_adapted_models, tiny_quantized):
    from transformers import AutoTokenizer

    from vocadapt.components.export.llama_cpp_checks import bits_per_byte, load_gguf

    llama_cpp_or_skip()
    bos = AutoTokenizer.from_pretrained(str(tiny_adapted_models["expand"])).bos_token_id
    texts = TEXTS + ITALIAN[:5]
    scores = {quant: bits_per_byte(load_gguf(tiny_quantized[quant]), texts, bos)
              for quant in ("f16", "q8_0", "q4_k_m")}
    print("bits per byte (tiny expand model):", {quant: round(value, 4) for quant, value in scores.items()})
    for quant, bound in BPB_LOSS_BOUND.items():
        assert scores[quant] - scores["f16"] <= bound, (quant, scores)
    assert scores["q4_k_m"] != scores["f16"]  # the quantised file is really another file


def test_a_pre_tokenizer_llama_cpp_does_not_know_is_refused_before_writing(tiny_adapted_models, gguf_converter,
                                                                            tmp_path):
    import json
    import shutil

    from vocadapt.components.errors import UserError
    from vocadapt.components.export.gguf import export_gguf

    folder = tmp_path / "odd"
    shutil.copytree(tiny_adapted_models["replace"], folder)
    path = folder / "tokenizer.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "[aeiou]"}, "behavior": "Isolated", "invert": False},
        data["pre_tokenizer"]]}
    path.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / "out" / "odd.gguf"
    with pytest.raises(UserError, match="llama.cpp has no pre-tokenizer.*Split.*nothing was written"):
        export_gguf(folder, out, "f16", gguf_converter)
    assert list(out.parent.iterdir()) == []


def test_llama_cpp_tokenizing_otherwise_than_the_tokenizer_refuses_the_export(tiny_adapted_models, tiny_ggufs):
    """The check every export runs before keeping its file: llama.cpp reading a GGUF whose vocabulary is not the
    tokenizer's (here the expand model's file against the replace model's tokenizer) is refused."""
    from vocadapt.components.errors import UserError
    from vocadapt.components.export.gguf import _check_llama_cpp_tokenization

    llama_cpp_or_skip()
    assert _check_llama_cpp_tokenization(tiny_adapted_models["replace"], tiny_ggufs[("replace", "f16")]) > 6
    with pytest.raises(UserError, match=r"llama.cpp, reading the GGUF of .*tokenizes \d+ of \d+ probe texts.*"
                                        "nothing was written"):
        _check_llama_cpp_tokenization(tiny_adapted_models["replace"], tiny_ggufs[("expand", "f16")])


def test_llama_cpp_loads_without_its_extra_buffer_types_and_restores_its_defaults(tiny_quantized):
    """A batched eval of a q8_0 model crashed llama.cpp's AMX kernels on a Sapphire Rapids CPU (load_gguf)."""
    import llama_cpp

    from vocadapt.components.export.llama_cpp_checks import load_gguf

    llama_cpp_or_skip()
    llm = load_gguf(tiny_quantized["q8_0"])
    assert llm.model_params.use_extra_bufts is False
    assert llama_cpp.llama_model_default_params().use_extra_bufts is True  # only that load had them off
    llm.reset()
    llm.eval(list(range(1, 33)))  # 32 positions at once: the batch that crashed
    assert llm.n_tokens == 32
