"""lm-eval's generative tasks through vocadapt's vLLM server: with ``generation.backend: vllm`` the harness step
sends a generate_until task to the server with lm-eval's ``local-completions`` model (the model's tokenizer, token
ids over HTTP), keeps the multiple-choice task in memory, merges both into one set of scores, and stops the server
afterwards. Skipped only when the serving environment is absent (`ensure_serving_venv()` builds it)."""

from __future__ import annotations

import json
import os
from importlib.util import find_spec

import pytest
import yaml

from vocadapt.platform.evaluation.serving import serving_python

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not serving_python().is_file(), reason="no vLLM serving environment (ensure_serving_venv)"),
    pytest.mark.skipif(find_spec("tenacity") is None,  # worded as the serving environment: CI must not skip it
                       reason="no vLLM serving environment client: lm-eval's API models need lm-eval[api] (tenacity)"),
]

PROMPTS = ["E Dio disse:", "Text: Good morning.\nTranslation:", "In principio"]


def _local_tasks(folder):
    """A generative task (chrF) and a multiple-choice task (acc) on three local records each."""
    rows = [{"prompt": prompt, "reference": "la luce", "choices": ["luce", "terra"], "gold": 0} for prompt in PROMPTS]
    (folder / "tiny.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    common = {"dataset_path": "json", "dataset_kwargs": {"data_files": {"test": str(folder / "tiny.jsonl")}},
              "test_split": "test", "doc_to_text": "{{prompt}}", "metadata": {"version": 1}}
    generative = common | {
        "task": "vocadapt_tiny_generate", "output_type": "generate_until", "doc_to_target": "{{reference}}",
        "generation_kwargs": {"until": ["\n"], "do_sample": False, "max_gen_toks": 5},
        "metric_list": [{"metric": "chrf", "aggregation": "chrf", "higher_is_better": True}]}
    choice = common | {
        "task": "vocadapt_tiny_choice", "output_type": "multiple_choice", "doc_to_choice": "{{choices}}",
        "doc_to_target": "{{gold}}", "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}]}
    for spec in (generative, choice):
        (folder / f"{spec['task']}.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")


def test_generative_tasks_go_to_the_vllm_server_and_the_rest_stay_in_memory(vllm_sized_model, tmp_path,
                                                                          monkeypatch):
    from vocadapt.platform.evaluation import harness
    from vocadapt.platform.evaluation.offline_tasks import TaskFolder
    from vocadapt.pipelines.evaluate_steps import Contender, harness_step, load_model
    from vocadapt.platform.evaluation.suites import load_suite

    tasks_dir = tmp_path / "tasks"
    tasks_dir.mkdir()
    _local_tasks(tasks_dir)
    manager = harness.task_manager(tasks_dir, include_defaults=False)
    assert harness.generative_tasks(["vocadapt_tiny_choice", "vocadapt_tiny_generate"], manager) == [
        "vocadapt_tiny_generate"]

    generated, groups = [], []
    real_model, real_endpoint = harness.completions_model, harness.ServedGeneration.endpoint

    def spy_model(*args, **kwargs):
        lm = real_model(*args, **kwargs)
        assert type(lm).__name__ == "LocalCompletionsAPI" and lm.base_url.endswith("/v1/completions")
        original = lm.generate_until

        def generate_until(requests, *rest, **options):
            texts = original(requests, *rest, **options)
            generated.extend(zip((r.args[0] for r in requests), texts))
            return texts

        lm.generate_until = generate_until
        return lm

    def spy_endpoint(self):
        endpoint = real_endpoint(self)
        groups.append(self.server.process.pid)  # the server leads its own process group
        return endpoint

    monkeypatch.setattr(harness, "completions_model", spy_model)
    monkeypatch.setattr(harness.ServedGeneration, "endpoint", spy_endpoint)
    suite = load_suite("offline-vllm", {"harness.batch_size": "2", "harness.max_length": "256"})
    model, tokenizer = load_model(vllm_sized_model)
    folder = TaskFolder(tasks_dir, cloze_tasks=["vocadapt_tiny_choice"], translation_tasks=["vocadapt_tiny_generate"])
    scores = harness_step(suite, Contender(vllm_sized_model, model, tokenizer), folder, work_dir=tmp_path)

    assert 0 <= scores["benchmark.vocadapt_tiny_generate.chrf"] <= 100
    assert 0 <= scores["benchmark.vocadapt_tiny_choice.acc"] <= 1
    # every generation came from the server, once per record, greedy up to the first newline
    assert sorted(prompt for prompt, _ in generated) == sorted(PROMPTS)
    assert all(isinstance(text, str) and "\n" not in text for _, text in generated)
    log = (tmp_path / f"vllm-harness-{vllm_sized_model.name}.log").read_text(errors="replace")
    assert "POST /v1/completions" in log
    assert len(groups) == 1  # one server for the step
    with pytest.raises(ProcessLookupError):
        os.killpg(groups[0], 0)  # and it is gone afterwards
