"""SQuAD-it in the cluster suite: the task YAML loads in lm-eval with our functions, builds SAVA Table 9's 2-shot
prompt and scores ROUGE-L against the best reference; checked on a local SQuAD-format file (no hub)."""

from __future__ import annotations

import json

import pytest

from vocadapt.components.errors import UserError
from vocadapt.platform.evaluation.question_answering import process_results, reference_answers
from vocadapt.platform.evaluation.suites import TASKS_DIR, load_suite

SICHUAN = {  # SAVA Table 9's example
    "id": "sichuan", "question": "In quale anno si è verificato il terremoto nel Sichuan?",
    "context": "Il terremoto del Sichuan del 2008 o il terremoto del Gran Sichuan, misurato a 8.0 Ms e 7.9 Mw,\n"
               "e si è verificato alle 02:28:01 PM China Standard Time.",
    "answers": {"text": ["2008", "nel 2008"], "answer_start": [29, 25]},
}


def _squad_file(path, questions):
    path.write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions), encoding="utf-8")
    return str(path)


def test_squad_it_task_prompt_and_rouge_l_in_lm_eval(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.tasks._yaml_loader import load_yaml

    config = load_yaml(TASKS_DIR / "vocadapt_squad_it.yaml", resolve_func=True)
    assert config["dataset_path"] == "crux82/squad_it" and config["num_fewshot"] == 2
    assert [m["metric"] for m in config["metric_list"]] == ["rougeL"]
    shots = [{"id": f"s{i}", "context": f"La città di Lecce fu fondata nel {1000 + i}.", "question": "Quando?",
              "answers": {"text": [f"nel {1000 + i}"], "answer_start": [30]}} for i in range(3)]
    # the same config, reading a local file in the hub dataset's format instead of the hub
    files = {"train": _squad_file(tmp_path / "train.jsonl", shots),
             "test": _squad_file(tmp_path / "test.jsonl", [SICHUAN])}
    config.update(dataset_path="json", dataset_name=None, dataset_kwargs={"data_files": files})
    task = ConfigurableTask(config=config)
    task.set_fewshot_seed(0)
    doc = next(iter(task.test_docs()))
    prompt = task.fewshot_context(doc, num_fewshot=2)
    blocks = prompt.split("\n\n")
    assert len(blocks) == 3 and blocks[0] == ("Contesto: La città di Lecce fu fondata nel 1000.\nDomanda: Quando?\n"
                                              "Risposta: nel 1000")
    assert blocks[2].startswith("Contesto: Il terremoto del Sichuan del 2008 o il terremoto")
    assert "Mw, e si è verificato" in blocks[2]  # the context's newline does not end the example early
    assert blocks[2].endswith("\nDomanda: In quale anno si è verificato il terremoto nel Sichuan?\nRisposta:")
    assert task.process_results(doc, [" 2008\nContesto: ..."]) == {"rougeL": pytest.approx(100.0)}
    assert task.aggregation()["rougeL"].__name__ == "mean" and task.higher_is_better() == {"rougeL": True}


def test_rouge_l_takes_the_best_reference_and_keeps_accents():
    assert process_results(SICHUAN, ["nel 2008"]) == {"rougeL": pytest.approx(100.0)}
    partial = process_results(SICHUAN, ["il 2008 credo"])["rougeL"]
    assert 0 < partial < 100
    city = {"answers": [{"text": "la città"}], "id": "x"}
    assert process_results(city, ["la citta"])["rougeL"] == pytest.approx(50.0)
    with pytest.raises(ValueError, match="no reference answer"):
        reference_answers({"answers": {"text": [" "]}, "id": "empty"})


def test_cluster_suite_runs_squad_it_two_shot_and_the_rest_zero_shot():
    suite = load_suite("cluster-it")
    groups = suite.fewshot_groups()
    assert groups[2] == ["vocadapt_squad_it"]
    assert "vocadapt_squad_it" not in groups[0] and "arc_it" in groups[0]
    with pytest.raises(UserError, match="task_fewshot names tasks the suite does not run"):
        load_suite("cluster-it", {"task_fewshot": {"vocadapt_no_such_task": 2}})


def test_harness_step_runs_each_shot_count_once(monkeypatch):
    from vocadapt.platform.evaluation import harness
    from vocadapt.pipelines.evaluate_steps import Contender, harness_step

    calls = []

    def fake_run_harness(model, tokenizer, tasks, settings, *, served=None):
        calls.append((tuple(tasks), settings.num_fewshot))
        return {"results": {task: {"score,none": float(settings.num_fewshot)} for task in tasks}}

    monkeypatch.setattr(harness, "run_harness", fake_run_harness)
    suite = load_suite("cluster-it", {"tasks": ["arc_it", "vocadapt_squad_it", "xcopa_it"],
                                      "task_fewshot": {"vocadapt_squad_it": 2}})
    scores = harness_step(suite, Contender(None, None, None), tasks=None)
    assert sorted(calls) == [(("arc_it", "xcopa_it"), 0), (("vocadapt_squad_it",), 2)]
    assert scores == {"benchmark.arc_it.score": 0.0, "benchmark.xcopa_it.score": 0.0,
                      "benchmark.vocadapt_squad_it.score": 2.0}
