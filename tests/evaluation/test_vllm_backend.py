"""The vLLM path for real: a server started from the serving environment, greedy generation over HTTP, token ids
returned, agreement with the transformers backend, and the server's process group gone afterwards. Skipped only
when the serving environment is absent (`ensure_serving_venv()` builds it: a large download)."""

from __future__ import annotations

import os

import pytest

from vocadapt.platform.evaluation.serving import serving_python

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(not serving_python().is_file(), reason="no vLLM serving environment (ensure_serving_venv)"),
]


def test_vllm_server_generates_greedily_like_transformers(vllm_sized_model, tmp_path):
    from vocadapt.components.evaluation.prompts import STOP
    from vocadapt.platform.evaluation.generation import TransformersBackend, VllmBackend
    from vocadapt.platform.evaluation.serving import VllmServer
    from vocadapt.platform.model_loading import load_model
    from vocadapt.platform.serving.serve_check import encode_mismatch, greedy_decode

    prompts = ["Traduci dall'Inglese all'Italiano\nText: Good morning.\nTranslation:", "E Dio disse:"]
    server = VllmServer(vllm_sized_model, log_file=tmp_path / "vllm.log", max_model_len=512)
    with server:
        record = VllmBackend(server.base_url, server.model_name).generate(prompts, max_new_tokens=6)
        group = server.process.pid  # the server leads its own process group
        sockets = [path for path in server.socket_dir.iterdir() if path.is_socket()]
    assert sockets, "vLLM's engine sockets are in the server's own folder (VLLM_RPC_BASE_PATH)"
    assert not server.socket_dir.exists()  # and go with it: nothing left in /tmp
    assert server.process.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(group, 0)  # no process of the server's group survives
    assert len(record.texts) == 2 and all(0 < len(ids) <= 6 for ids in record.token_ids)
    model, tokenizer = load_model(vllm_sized_model)
    reference = TransformersBackend(model, tokenizer).generate(prompts, max_new_tokens=6)
    # same greedy decoding, same weights: the first generated token agrees with the batched backend's
    assert [ids[0] for ids in record.token_ids] == [ids[0] for ids in reference.token_ids]
    assert "\n" not in "".join(record.texts)
    # and every token up to the stop, and the text, with transformers' greedy decode of each prompt alone (as vLLM
    # encodes it: the tokenizer's special tokens added, no padding)
    for prompt, text, ids in zip(prompts, record.texts, record.token_ids, strict=True):
        expected = greedy_decode(vllm_sized_model, prompt, 6)
        assert ids == expected[:len(ids)], f"{prompt!r}: {encode_mismatch(tokenizer, expected, ids)}"
        assert text == tokenizer.decode(expected, skip_special_tokens=True).split(STOP)[0], (prompt, text)
