"""Offline lm-eval tasks from held-out text: deterministic files, lm-eval runs them in memory, scores flatten."""

from __future__ import annotations

import json

import pytest
import yaml

from vocadapt.components.errors import UserError
from vocadapt.platform.evaluation.offline_tasks import HeldOutData, build_offline_tasks
from vocadapt.platform.evaluation.suites import available_suites, load_suite


def test_every_shipped_suite_parses():
    names = available_suites()
    assert {"offline", "cluster-it"} <= set(names)
    for name in names:
        assert load_suite(name).name == name


def test_bad_suite_is_a_clear_error(tmp_path):
    with pytest.raises(UserError, match="no evaluation suite 'nope'"):
        load_suite("nope")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nkind: offline\ncloze: {items: 0}\n")
    with pytest.raises(UserError, match="cloze.items"):
        load_suite(bad)


def test_tasks_are_deterministic_and_versioned(tmp_path, held_out, quick_suite_overrides):
    suite = load_suite("offline", quick_suite_overrides)
    first = build_offline_tasks(suite, held_out, tmp_path / "a")
    again = build_offline_tasks(suite, held_out, tmp_path / "a")
    assert first.tasks == ["vocadapt_cloze_it", "vocadapt_cloze_en", "vocadapt_translation_en_it",
                           "vocadapt_translation_it_en"]
    data = {p.name: p.read_bytes() for p in sorted(first.path.glob("*.jsonl"))}
    assert data == {p.name: p.read_bytes() for p in sorted(again.path.glob("*.jsonl"))}
    spec = yaml.safe_load((first.path / "vocadapt_cloze_it.yaml").read_text())
    assert spec["metadata"]["version"] == suite.version and spec["output_type"] == "multiple_choice"
    assert {m["metric"] for m in spec["metric_list"]} >= {"acc", "acc_bytes"}
    items = [json.loads(line) for line in (first.path / "vocadapt_cloze_it.jsonl").read_text().splitlines()]
    assert len(items) == 12 and all(len(item["choices"]) == 4 for item in items)
    pairs = first.translation_items("vocadapt_translation_en_it")
    assert pairs[0]["prompt"].startswith("Traduci dall'Inglese all'Italiano\nText: ")
    assert pairs[0]["prompt"].endswith(f"Text: {' '.join(pairs[0]['source_text'].split())}\nTranslation:")
    assert not list(tmp_path.glob(".a.*")), "no staging folder left behind"


def test_missing_held_out_data_fails_before_writing(tmp_path, held_out, quick_suite_overrides):
    suite = load_suite("offline", quick_suite_overrides)
    broken = HeldOutData(monolingual={"it": held_out.monolingual["it"]}, parallel={}, parallel_shots={})
    with pytest.raises(UserError, match="vocadapt assets --lang en"):
        build_offline_tasks(suite, broken, tmp_path / "tasks")
    assert not (tmp_path / "tasks").exists() and not list(tmp_path.iterdir())


@pytest.mark.timeout(300)
def test_lm_eval_scores_the_tasks_in_memory(tmp_path, held_out, quick_suite_overrides, adapted_model_dir):
    from vocadapt.platform.evaluation.harness import HarnessSettings, flatten_results, run_harness
    from vocadapt.platform.model_loading import load_model

    suite = load_suite("offline", quick_suite_overrides)
    tasks = build_offline_tasks(suite, held_out, tmp_path / "tasks")
    model, tokenizer = load_model(adapted_model_dir)
    results = run_harness(model, tokenizer, tasks.tasks,
                          HarnessSettings(include_path=tasks.path, batch_size=4, max_length=256, limit=6))
    scores = flatten_results(results)
    for lang in ("it", "en"):
        for metric in ("acc", "acc_norm", "acc_bytes"):
            assert 0.0 <= scores[f"vocadapt_cloze_{lang}.{metric}"] <= 1.0
    assert 0.0 <= scores["vocadapt_translation_en_it.chrf"] <= 100.0
    assert "vocadapt_translation_it_en.chrf" in scores
    assert not [key for key in scores if key.endswith("sample_len")]
    with pytest.raises(ValueError, match="does not know the tasks"):
        run_harness(model, tokenizer, ["vocadapt_no_such_task"], HarnessSettings(include_path=tasks.path))


@pytest.mark.timeout(300)
def test_score_model_in_memory(held_out, quick_suite_overrides, source_model_dir):
    from vocadapt.pipelines.evaluate_steps import load_model, score_model

    model, tokenizer = load_model(source_model_dir)
    overrides = quick_suite_overrides | {"harness.limit": "3", "translation.directions": "[[en, it]]",
                                         "cloze.languages": "[it]"}
    metrics = score_model(model, tokenizer, "offline", held_out=held_out, overrides=overrides)
    assert set(metrics) >= {"benchmark.vocadapt_cloze_it.acc_bytes", "benchmark.vocadapt_translation_en_it.chrf",
                            "bpb.it", "parameters.total"}
    assert "benchmark.vocadapt_cloze_en.acc" not in metrics
