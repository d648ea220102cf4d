"""The offline-vllm suite starts one vLLM server per model, which serves both its benchmarks and the generation
step (warmed up before timing), and stops it afterwards, after Ctrl-C too.

Two models against fakes (the server started and stopped without a process; lm-eval's ``local-completions`` and
``VllmBackend`` generating with the folder's model in memory), and once for real: one model, one real server from the
serving environment, whose every generation equals transformers' greedy decode (one server start, about a minute or
two on CPU; CI must run it: without the environment it fails there, see tests/conftest.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(600)


@pytest.fixture()
def fake_vllm(monkeypatch):
    """Every start, stop and generation of the fake vLLM servers, as (event, resolved model folder, ...)."""
    from vocadapt.platform.evaluation import generation, harness, serving
    from vocadapt.platform.model_loading import load_model

    events = []

    class FakeServer(serving.VllmServer):
        def __enter__(self):
            events.append(("start", self.model_name))
            self.port = 8000
            return self

        def stop(self):
            events.append(("stop", self.model_name))

    def completions_model(base_url, model_name, tokenizer_dir, *, batch_size, max_length, seed):
        from lm_eval.models.huggingface import HFLM

        model, tokenizer = load_model(Path(model_name))
        return HFLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size, max_length=max_length)

    class FakeBackend(generation.TransformersBackend):
        def __init__(self, base_url, model_name):
            super().__init__(*load_model(Path(model_name)))
            self.model_name = model_name

        def generate(self, prompts, *, max_new_tokens):
            events.append(("generate", self.model_name, max_new_tokens))
            return super().generate(prompts, max_new_tokens=max_new_tokens)

    monkeypatch.setattr(serving, "VllmServer", FakeServer)
    monkeypatch.setattr(harness, "completions_model", completions_model)
    monkeypatch.setattr(generation, "VllmBackend", FakeBackend)
    return events


def test_one_server_per_model_serves_benchmarks_and_generation(tmp_path, fake_vllm, adapted_model_dir,
                                                                source_model_dir, held_out, quick_suite_overrides):
    from vocadapt.pipelines.evaluate import EvaluationRequest, run_evaluate

    request = EvaluationRequest(
        model=str(adapted_model_dir), suite="offline-vllm", compare_to=str(source_model_dir),
        suite_overrides=quick_suite_overrides | {"harness.limit": "2"}, held_out=held_out,
        tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", work_dir=tmp_path / "work",
    )
    metrics = run_evaluate(request).metrics

    folders = [str(Path(folder).resolve()) for folder in (adapted_model_dir, source_model_dir)]
    kinds = [event[0] for event in fake_vllm]
    assert Counter(event[:2] for event in fake_vllm if event[0] == "start") == {("start", f): 1 for f in folders}
    assert Counter(event[:2] for event in fake_vllm if event[0] == "stop") == {("stop", f): 1 for f in folders}
    # both servers run until the generation step is over; each model's first generation is the short warm-up
    assert kinds.index("stop") > len(kinds) - 1 - kinds[::-1].index("generate")
    for folder in folders:
        assert [e[2] for e in fake_vllm if e[:2] == ("generate", folder)][:2] == [4, 8]
    for prefix in ("", "source_model."):
        assert 0 <= metrics[f"{prefix}benchmark.vocadapt_translation_en_it.chrf"] <= 100
        assert metrics[f"{prefix}generation.vocadapt_translation_en_it.tokens_per_second"] > 0


def test_servers_stop_after_ctrl_c(tmp_path, fake_vllm, adapted_model_dir, source_model_dir):
    from vocadapt.pipelines.evaluate_steps import model_servers
    from vocadapt.platform.evaluation.suites import load_suite

    folders = {"": adapted_model_dir, "source_model.": source_model_dir}
    with pytest.raises(KeyboardInterrupt), model_servers(load_suite("offline-vllm"), folders, tmp_path) as servers:
        for served in servers.values():
            served.endpoint()
            served.endpoint()  # started once, kept
        raise KeyboardInterrupt
    started = [event for event in fake_vllm if event[0] == "start"]
    assert len(started) == 2
    assert sorted(folder for _, folder in started) == sorted(folder for kind, folder in fake_vllm if kind == "stop")
    with model_servers(load_suite("offline"), folders, tmp_path) as servers:
        assert servers == {}  # the transformers backend needs no server


def test_one_real_vllm_server_serves_the_benchmarks_and_the_generation_greedily(tmp_path, monkeypatch,
                                                                                vllm_sized_model, held_out,
                                                                                quick_suite_overrides):
    """The evaluation of one model through the offline-vllm suite on a real server: started once, used by lm-eval's
    generative benchmark and by every generation, stopped afterwards with its whole process group; each generated
    answer is transformers' greedy continuation of its prompt (the same token ids, the text up to the stop)."""
    import os

    from vocadapt.pipelines.evaluate import EvaluationRequest, run_evaluate
    from vocadapt.platform.evaluation import generation, harness, serving
    from vocadapt.platform.model_loading import load_checkpoint_tokenizer
    from vocadapt.platform.serving.serve_check import encode_mismatch, greedy_decode

    if not serving.serving_venv_ready():
        pytest.skip(f"no vLLM serving environment at {serving.serving_venv_dir()} (build it with `make serving-env`)")
    events, answers = [], []

    class RecordedServer(serving.VllmServer):
        def __enter__(self):
            server = super().__enter__()
            events.append(("start", self.model_name, self.base_url, self.process.pid))
            return server

        def stop(self):
            if self.process is not None:
                events.append(("stop", self.model_name, self.base_url, self.process.pid))
            super().stop()

    real_completions = harness.completions_model

    def recorded_completions(base_url, *args, **kwargs):
        events.append(("benchmark", base_url))
        return real_completions(base_url, *args, **kwargs)

    class RecordedBackend(generation.VllmBackend):
        def generate(self, prompts, *, max_new_tokens):
            record = super().generate(prompts, max_new_tokens=max_new_tokens)
            events.append(("generate", self.base_url))
            answers.extend((prompt, max_new_tokens, text, ids) for prompt, text, ids in
                           zip(prompts, record.texts, record.token_ids, strict=True))
            return record

    monkeypatch.setattr(serving, "VllmServer", RecordedServer)
    monkeypatch.setattr(harness, "completions_model", recorded_completions)
    monkeypatch.setattr(generation, "VllmBackend", RecordedBackend)
    request = EvaluationRequest(
        model=str(vllm_sized_model), suite="offline-vllm", suite_overrides=quick_suite_overrides |
        {"harness.limit": "2"}, held_out=held_out, tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        work_dir=tmp_path / "work", energy=False)
    metrics = run_evaluate(request).metrics

    starts = [event for event in events if event[0] == "start"]
    assert len(starts) == 1 and starts[0][1] == str(vllm_sized_model.resolve()), events
    url, group = starts[0][2], starts[0][3]
    kinds = [event[0] for event in events]
    assert kinds[0] == "start" and kinds[-1] == "stop" and kinds.count("stop") == 1, kinds
    assert {event[1] for event in events if event[0] in ("benchmark", "generate")} == {url}  # the one server
    assert "benchmark" in kinds and kinds.count("generate") >= 2, kinds  # the warm-up, then the timed generation
    with pytest.raises(ProcessLookupError):
        os.killpg(group, 0)  # no process of the server's group survives
    assert 0 <= metrics["benchmark.vocadapt_translation_en_it.chrf"] <= 100
    assert metrics["generation.vocadapt_translation_en_it.tokens_per_second"] > 0

    tokenizer = load_checkpoint_tokenizer(vllm_sized_model)
    assert answers and all(ids for _, _, _, ids in answers), answers
    for prompt, max_new_tokens, text, ids in answers:
        expected = greedy_decode(vllm_sized_model, prompt, max_new_tokens)
        assert ids == expected[:len(ids)], f"{prompt!r}: {encode_mismatch(tokenizer, expected, ids, 'vLLM')}"
        greedy_text = tokenizer.decode(expected, skip_special_tokens=True)
        assert text == greedy_text.split(generation.STOP)[0], (prompt, text, greedy_text)  # vLLM stops at STOP


def test_each_server_asks_for_no_more_context_than_its_model_has(tmp_path, monkeypatch):
    """vLLM refuses a --max-model-len past the model's positions: a 512-position model gets 512, a long one the
    suite's length, a config that does not say gets the suite's length too."""
    import json

    from vocadapt.pipelines.evaluate_steps import model_context, model_servers
    from vocadapt.platform.evaluation import harness
    from vocadapt.platform.evaluation.suites import load_suite

    asked = {}

    class Recording:
        def __init__(self, model_dir, *, max_model_len, log_file=None):
            asked[model_dir.name] = max_model_len

        def close(self):
            pass

    monkeypatch.setattr(harness, "ServedGeneration", Recording)
    folders = {}
    for name, config in {"short": {"max_position_embeddings": 512}, "long": {"max_position_embeddings": 131072},
                         "gemma-like": {"text_config": {"max_position_embeddings": 1024}}, "unknown": {}}.items():
        folders[name] = tmp_path / name
        folders[name].mkdir()
        (folders[name] / "config.json").write_text(json.dumps(config), encoding="utf-8")
    assert model_context(folders["gemma-like"]) == 1024 and model_context(folders["unknown"]) is None
    with model_servers(load_suite("offline-vllm"), folders, tmp_path):
        pass
    assert asked["short"] == 512 and asked["gemma-like"] == 1024
    assert asked["long"] == asked["unknown"] >= 2048
