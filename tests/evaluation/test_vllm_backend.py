"""The vLLM path for real: a server started from the serving environment, greedy generation over HTTP, token ids
returned, agreement with the transformers backend, and the server's process group gone afterwards. Skipped only
when the serving environment is absent (`ensure_serving_venv()` builds it: a large download)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vocadapt.platform.evaluation.serving import serving_python

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(not serving_python().is_file(), reason="no vLLM serving environment (ensure_serving_venv)"),
]


@pytest.fixture(scope="module")
def vllm_sized_model(tmp_path_factory, adapted_model_dir) -> Path:
    """The adapted tiny model's tokenizer with a Llama whose head_dim is 32: vLLM's CPU attention has no kernel
    for head_dim 8 ("Unsupported CPU attention configuration: head_dim=8")."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("vllm-model")
    tokenizer = AutoTokenizer.from_pretrained(adapted_model_dir)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_vllm_server_generates_greedily_like_transformers(vllm_sized_model, tmp_path):
    from vocadapt.platform.evaluation.generation import TransformersBackend, VllmBackend
    from vocadapt.platform.evaluation.serving import VllmServer
    from vocadapt.platform.evaluation.steps import load_model

    prompts = ["Traduci dall'Inglese all'Italiano\nText: Good morning.\nTranslation:", "E Dio disse:"]
    server = VllmServer(vllm_sized_model, log_file=tmp_path / "vllm.log", max_model_len=512)
    with server:
        record = VllmBackend(server.base_url, server.model_name).generate(prompts, max_new_tokens=6)
        group = server.process.pid  # the server leads its own process group
    assert server.process.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(group, 0)  # no process of the server's group survives
    assert len(record.texts) == 2 and all(0 < len(ids) <= 6 for ids in record.token_ids)
    model, tokenizer = load_model(vllm_sized_model)
    reference = TransformersBackend(model, tokenizer).generate(prompts, max_new_tokens=6)
    # same greedy decoding, same weights: the first generated token agrees (float rounding may differ later)
    assert [ids[0] for ids in record.token_ids] == [ids[0] for ids in reference.token_ids]
    assert "\n" not in "".join(record.texts)
