"""ITA-Bench's Italian PIQA, SciQ and BoolQ in the cluster suite: each task YAML loads in lm-eval with our functions,
builds ITA-Bench's Italian prompt, picks the right gold choice and reports acc and acc_bytes; checked on local
files in the hub datasets' format (no hub)."""

from __future__ import annotations

import json

import pytest

from vocadapt.platform.evaluation.suites import TASKS_DIR, load_suite

PIQA = [
    {"id": "p0", "input": "How do I open a jar?", "input_translation": "Come si apre un barattolo?",
     "choices": ["Twist the lid.", "Shake it."], "choices_translation": ["Ruota il coperchio.", "Scuotilo."],
     "label": 0, "metadata": {"category": "question"}},
    {"id": "p1", "input": "To dry wet shoes,", "input_translation": "Per asciugare le scarpe bagnate,",
     "choices": ["fill them with paper.", "fill them with water."],
     "choices_translation": ["riempile di carta.", "riempile d'acqua."], "label": 0,
     "metadata": {"category": "text_completion"}},
]
SCIQ = [
    {"id": "s0", "input": "What gas do plants absorb?", "input_translation": "Quale gas assorbono le piante?",
     "choices": ["oxygen", "nitrogen", "carbon dioxide", "helium"],
     "choices_translation": ["ossigeno", "azoto", "anidride carbonica", "elio"], "label": 2,
     "metadata": {"category": "question", "passage": "Plants absorb carbon dioxide.",
                  "passage_translation": "Le piante assorbono anidride carbonica."}},
    {"id": "s1", "input": "What is ice?", "input_translation": "Che cos'è il ghiaccio?",
     "choices": ["solid water", "gas", "metal", "salt"],
     "choices_translation": ["acqua solida", "gas", "metallo", "sale"], "label": 0,
     "metadata": {"category": "question", "passage": "", "passage_translation": ""}},
]
BOOLQ = [
    {"id": "b0", "input": "is rome the capital of italy", "input_translation": "roma è la capitale d'italia",
     "label": "True", "metadata": {"category": "question", "passage": "Rome is the capital of Italy.",
                                   "passage_translation": "Roma è la capitale d'Italia."}},
    {"id": "b1", "input": "is milan by the sea", "input_translation": "milano è sul mare",
     "label": False, "metadata": {"category": "question", "passage": "Milan is inland.",
                                  "passage_translation": "Milano è nell'entroterra."}},
]
EXPECTED = {  # task -> (records, split it scores, first prompt, choices of the first record, gold of each)
    "vocadapt_piqa_it": (PIQA, "validation", "Domanda: Come si apre un barattolo?\nRisposta: ",
                         ["Ruota il coperchio.", "Scuotilo."], [0, 0]),
    "vocadapt_sciq_it": (SCIQ, "test", "Testo: Le piante assorbono anidride carbonica.\nDomanda: Quale gas "
                         "assorbono le piante?\nRisposta: ", ["ossigeno", "azoto", "anidride carbonica", "elio"],
                         [2, 0]),
    "vocadapt_boolq_it": (BOOLQ, "validation", "Roma è la capitale d'Italia.\nDomanda: roma è la capitale "
                          "d'italia\nRisposta (sì o no): ", ["sì", "no"], [0, 1]),
}
DATASETS = {"vocadapt_piqa_it": "sapienzanlp/piqa_italian", "vocadapt_sciq_it": "sapienzanlp/sciq_italian",
            "vocadapt_boolq_it": "sapienzanlp/boolq_italian"}


def _local_task(name, tmp_path):
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.tasks._yaml_loader import load_yaml

    records, split, *_ = EXPECTED[name]
    config = load_yaml(TASKS_DIR / f"{name}.yaml", resolve_func=True)
    assert config["dataset_path"] == DATASETS[name] and config["dataset_name"] == "default"
    assert config["output_type"] == "multiple_choice"
    assert [m["metric"] for m in config["metric_list"]] == ["acc", "acc_norm", "acc_bytes"]
    # the scored split is the one lm-eval's English original scores
    assert (config.get("test_split") or config.get("validation_split")) == split
    data = tmp_path / f"{name}.{split}.json"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    # the same config, reading a local file in the hub dataset's format instead of the hub
    splits = {key: config[key] for key in ("training_split", "validation_split", "test_split", "fewshot_split")
              if config.get(key)}
    config.update(dataset_path="json", dataset_name=None,
                  dataset_kwargs={"data_files": {s: str(data) for s in set(splits.values())}})
    return ConfigurableTask(config=config)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_ita_bench_task_prompt_gold_and_byte_normalised_accuracy(name, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    task = _local_task(name, tmp_path)
    _, _, prompt, first_choices, golds = EXPECTED[name]
    docs = list(task.test_docs() if task.has_test_docs() else task.validation_docs())
    assert [task.doc_to_target(doc) for doc in docs] == golds
    assert task.doc_to_text(docs[0]) == prompt and task.doc_to_choice(docs[0]) == first_choices
    assert task.fewshot_context(docs[0], num_fewshot=0) == prompt
    # the gold choice is longer than the shortest wrong one (every record above): give that wrong one the better
    # total but the worse score per byte, so acc misses and acc_bytes hits
    gold, choices = golds[0], task.doc_to_choice(docs[0])
    size = [len(choice.encode("utf-8")) for choice in choices]
    wrong = min((i for i in range(len(choices)) if i != gold), key=size.__getitem__)
    assert size[wrong] < 0.9 * size[gold]
    loglikelihoods = [(-3.0 * n, False) for n in size]
    loglikelihoods[gold] = (-1.0 * size[gold], False)
    loglikelihoods[wrong] = (-0.9 * size[gold], False)
    scores = task.process_results(docs[0], loglikelihoods)
    assert scores["acc"] == 0.0 and scores["acc_bytes"] == 1.0
    assert task.aggregation()["acc_bytes"].__name__ == "mean"


def test_boolq_labels_and_unknown_records_fail_loudly():
    from vocadapt.platform.evaluation.ita_bench import boolq_doc_to_target, piqa_doc_to_text

    assert [boolq_doc_to_target({"label": v}) for v in ("True", "False", True, False)] == [0, 1, 0, 1]
    with pytest.raises(ValueError, match="neither True nor False"):
        boolq_doc_to_target({"id": "x", "label": "maybe"})
    with pytest.raises(ValueError, match="unknown category"):
        piqa_doc_to_text({"id": "x", "input_translation": "?", "metadata": {"category": "riddle"}})


def test_cluster_suite_runs_sava_table_3_in_italian_and_english():
    tasks = set(load_suite("cluster-it").tasks)
    italian = {"hellaswag_it", "m_mmlu_it", "arc_it", "vocadapt_piqa_it", "vocadapt_sciq_it", "vocadapt_boolq_it"}
    english = {"hellaswag", "mmlu", "arc_easy", "piqa", "sciq", "boolq"}
    assert italian | english <= tasks
