"""Fixtures for the evaluation tests: held-out data from the committed corpus slices, two tiny models (a "source"
with an English tokenizer and an "adapted" one with an Italian tokenizer), and a fast offline suite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


@pytest.fixture(scope="session")
def held_out(fixture_corpora):
    from vocadapt.platform.evaluation.offline_tasks import HeldOutData

    return HeldOutData(
        monolingual={"it": fixture_corpora["it.validation"], "en": fixture_corpora["en.validation"]},
        parallel={"it": fixture_corpora["it-en.validation"]},
        parallel_shots={"it": fixture_corpora["it-en.train"]},
    )


@pytest.fixture(scope="session")
def source_model_dir(tmp_path_factory, fixture_corpora) -> Path:
    from tests.pipelines.tiny_world import build_source_model

    return build_source_model(tmp_path_factory.mktemp("source"), [fixture_corpora["en.train"]], vocab_size=300)


@pytest.fixture(scope="session")
def adapted_model_dir(tmp_path_factory, fixture_corpora) -> Path:
    from tests.pipelines.tiny_world import build_source_model

    return build_source_model(tmp_path_factory.mktemp("adapted"), [fixture_corpora["it.train"]], vocab_size=320)


@pytest.fixture()
def quick_suite_overrides() -> dict[str, str]:
    """The offline suite shrunk to seconds on the tiny models."""
    return {
        "cloze.items": "12", "translation.items": "6", "translation.max_new_tokens": "8", "harness.batch_size": "4",
        "harness.max_length": "256", "generation.examples": "4", "generation.max_new_tokens": "8",
        "bits_per_byte.documents": "8", "bits_per_byte.max_length": "64", "similarity.anchors_per_kind": "8",
        "generation.repeats": "1",
    }


@pytest.fixture(scope="session")
def vllm_sized_model(tmp_path_factory, adapted_model_dir) -> Path:
    """The adapted tiny model's tokenizer with a Llama whose head_dim is 32: vLLM's CPU attention has no kernel
    for head_dim 8 ("Unsupported CPU attention configuration: head_dim=8"). 2048 positions: the evaluation's
    server asks for the generation step's default context (2048), which vLLM refuses past the model's."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("vllm-model")
    tokenizer = AutoTokenizer.from_pretrained(adapted_model_dir)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=2048,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
