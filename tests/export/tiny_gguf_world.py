"""The GGUF export tests' tiny world: texts, a tiny Llama with a given tokenizer, and the skip without
llama-cpp-python (a failure under VOCADAPT_REQUIRE_LLAMA_CPP=1, tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

ENGLISH = [
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "A small library opens at nine in the morning and closes at six.",
    "We will go to the market tomorrow to buy fresh fruit and vegetables.",
    "The weather was cold and windy, so everybody stayed at home.",
] * 30
ITALIAN = [
    "La città di Roma è la capitale d'Italia e conta molti abitanti.",
    "Il gatto dorme sul divano mentre fuori piove da ore.",
    "Domani andremo al mercato per comprare frutta e verdura fresca.",
    "La biblioteca comunale apre alle nove e chiude alle diciotto.",
    "Nel 2024 abbiamo letto 365 pagine: perché è così difficile?",
] * 30
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def llama_cpp_or_skip():
    try:
        import llama_cpp
    except ImportError:
        pytest.skip("no llama-cpp-python (llama.cpp's binding): `make gguf-tools` installs it")
    return llama_cpp


def f16_exact_and_sharp(model):
    """``model`` with every weight exactly representable in f16 (the f16 GGUF holds the same numbers) and its
    output head scaled up 8 times (random logits are nearly flat; sharper ones make arg-max ties rare)."""
    import torch

    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(8.0)
        for parameter in model.parameters():
            parameter.copy_(parameter.to(torch.float16).to(torch.float32))
    return model


def tiny_llama(tokenizer, folder: Path, seed: int) -> Path:
    """Random weights, exactly representable in f16 (so the f16 GGUF holds the same numbers), with a sharpened
    head so the arg-max is rarely a near tie."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         tie_word_embeddings=False, rms_norm_eps=1e-5)
    model = f16_exact_and_sharp(LlamaForCausalLM(config))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def adapted_twin(family: str, mode: str, folder: Path, kind: str) -> Path:
    """A one-layer, reduced-width twin of ``family`` (its real tokenizer) whose vocabulary vocadapt replaced with,
    or expanded by, a small Italian tokenizer trained like the family's (``kind``); the rows are random."""
    from transformers import AutoModelForCausalLM

    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer
    from vocadapt.components.tokenizers.expand import expand_with_target
    from vocadapt.components.tokenizers.replace import replace_vocabulary
    from vocadapt.components.tokenizers.saving import save_tokenizer
    from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, train_tokenizer_from_iterator
    from vocadapt.platform.families.twins import TwinShape, build_twin

    twin = build_twin(family, folder / "twin", TwinShape(layers=1, width="reduced", dtype="float32"))
    source = load_pretrained_tokenizer(str(twin))
    # Gemma-3 carries 6,415 added tokens into any tokenizer trained like it
    spec = TokenizerTrainingSpec(kind, 7000 if family == "gemma3" else 1200, like=source)
    target = train_tokenizer_from_iterator(ITALIAN, spec, folder / "target", show_progress=False)
    adapted = (replace_vocabulary(source, target) if mode == "replace" else expand_with_target(source, target)).tokenizer
    model = AutoModelForCausalLM.from_pretrained(str(twin))
    rows = model.get_input_embeddings().weight.shape[0]
    if mode == "replace" or len(adapted) > rows:
        model.resize_token_embeddings(len(adapted), mean_resizing=False)
    for role in ("bos", "eos", "pad"):
        setattr(model.config, f"{role}_token_id", getattr(adapted, f"{role}_token_id"))
        if model.generation_config is not None:
            setattr(model.generation_config, f"{role}_token_id", getattr(adapted, f"{role}_token_id"))
    out = folder / mode
    f16_exact_and_sharp(model).save_pretrained(out)
    save_tokenizer(adapted, out)  # as vocadapt writes it
    return out


# Two logits closer than this are a tie at f16: llama.cpp computes with f16 weights and rounds activations to f16 on
# the way into its matrix products, so it may order them either way (measured: a tie of 0.0003 logits, with logits
# of standard deviation 0.9, went the other way at step 26 of one tiny prompt)
F16_TIE = 1e-3


def greedy_disagreements(model, llm, prompt: list[int], steps: int = 32) -> tuple[list[int], list[str]]:
    """transformers' ``steps`` greedy tokens after ``prompt``, and the steps where llama.cpp (teacher-forced on
    that path) picks another token that is not tied with transformers' choice within :data:`F16_TIE`."""
    import torch

    from vocadapt.components.export.llama_cpp_checks import teacher_forced_choices

    with torch.no_grad():
        output = model.generate(torch.tensor([prompt]), max_new_tokens=steps, min_new_tokens=steps, do_sample=False,
                                pad_token_id=model.config.pad_token_id or 0)
        expected = output[0, len(prompt):].tolist()
        logits = model(output[:, :-1]).logits[0, len(prompt) - 1:]
    problems = []
    for step, (want, got) in enumerate(zip(expected, teacher_forced_choices(llm, prompt, expected))):
        gap = float(logits[step, want] - logits[step, got])
        if got != want and gap >= F16_TIE:
            problems.append(f"step {step}: transformers {want}, llama.cpp {got} (gap {gap:.4f})")
    return expected, problems
