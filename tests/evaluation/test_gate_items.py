"""The per-item parts the gates bootstrap: they sum to the logged metrics (bits per byte per document, cloze, chrF,
generation counts, fertility), and they survive the round trip through MLflow's gates/items.json."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.pipelines.tiny_world import build_source_model
from vocadapt.components.metrics.bits_per_byte import score_bits_per_byte, score_documents


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, fixture_corpora):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = build_source_model(tmp_path_factory.mktemp("tiny"), [fixture_corpora["it.train"]])
    return AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


def test_per_document_bits_sum_to_the_corpus_bits_per_byte(tiny, fixture_corpora):
    model, tokenizer = tiny
    documents = fixture_corpora["it.validation"].read_text(encoding="utf-8").splitlines()[:7]
    documents.append(" ".join(documents))  # longer than one window: its windows add up to it alone
    whole = score_bits_per_byte(model, tokenizer, documents, max_length=16, batch_size=3)
    parts = score_documents(model, tokenizer, documents, max_length=16, batch_size=3)
    assert sum(p.nats for p in parts) == pytest.approx(whole.nats, rel=1e-5)
    assert sum(p.bytes for p in parts) == whole.bytes and sum(p.tokens for p in parts) == whole.tokens
    alone = score_bits_per_byte(model, tokenizer, documents[-1:], max_length=16)
    assert parts[-1].nats == pytest.approx(alone.nats, rel=1e-5)


def test_score_model_item_parts_give_its_metrics(tiny, fixture_corpora, tmp_path):
    from vocadapt.pipelines.side_by_side import ItemSettings, SourceVocabulary, build_items, score_model

    model, tokenizer = tiny
    pairs = [json.loads(line) for line in Path(fixture_corpora["it-en.validation"]).read_text().splitlines()]
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs[:20]))
    (tmp_path / "shots.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs[20:30]))
    documents = fixture_corpora["it.validation"].read_text().splitlines()
    items = build_items(language="it", source_language="en", documents=documents,
                        settings=ItemSettings(items=4, seed=0, max_new_tokens=6),
                        parallel=(tmp_path / "test.jsonl", tmp_path / "shots.jsonl"),
                        out_of_domain={"target": documents[:3], "source": documents[3:5]})
    parts = {}
    metrics = score_model(model, tokenizer, items, source=SourceVocabulary(tokenizer), prefix="source_model.",
                          item_parts=parts)
    assert set(parts) == set(metrics) - {"source_model.generation.percent_generated_new"}
    for key, value in parts.items():
        assert float(value.value()) == pytest.approx(metrics[key]), key
    ood = parts["source_model.bpb_ood_target"]
    assert len(ood) == 3 and ood.parts[:, 1].tolist() == [len(d.encode()) for d in documents[:3]]
    assert math.isclose(metrics["source_model.bpb_ood_target"],
                        score_bits_per_byte(model, tokenizer, documents[:3], max_length=items.max_length).bits_per_byte,
                        rel_tol=1e-5)
    assert parts["source_model.benchmark.side_by_side_translation_en_it.chrf"].kind == "chrf"
    assert len(parts["source_model.benchmark.side_by_side_cloze_it.acc_bytes"]) == 4


def test_fertility_parts_pair_the_two_tokenizers_on_the_same_documents(tiny, fixture_corpora, tmp_path):
    from vocadapt.components.evaluation.bootstrap import paired_bootstrap
    from vocadapt.components.tokenizers.language_fertility import LanguageDocuments, language_fertility_report
    from vocadapt.pipelines.side_by_side import fertility_parts

    _, tokenizer = tiny
    english = build_source_model(tmp_path / "en", [fixture_corpora["en.train"]])
    from transformers import AutoTokenizer

    other = AutoTokenizer.from_pretrained(english)
    documents = fixture_corpora["it.validation"].read_text(encoding="utf-8").splitlines()[:30]
    parts = fertility_parts(other, tokenizer, documents, "it")
    target, source = (parts[f"fertility.{name}_tokenizer.it.tokens_per_word"] for name in ("target", "source"))
    assert float(target.value()) == pytest.approx(
        language_fertility_report(tokenizer, LanguageDocuments(documents, "it")).tokens_per_word)
    interval = paired_bootstrap(target, source)
    assert interval.low <= interval.estimate <= interval.high < 0  # the Italian tokenizer is shorter on Italian


def test_items_round_trip_through_mlflow(tmp_path):
    from vocadapt.components.evaluation.bootstrap import ItemParts, ratio_parts
    from vocadapt.platform.registry.gate_items import collect_gate_items, log_gate_items
    from vocadapt.platform.tracking import Tracker

    tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}", "items")
    with tracker.run("adapt") as parent:
        log_gate_items(tracker, parent.info.run_id, {"source_model.bpb_ood_target": ratio_parts([3.0, 4.0], [1, 2])})
        with tracker.run("adapt/fvt", parent_run_id=parent.info.run_id) as child:
            log_gate_items(tracker, child.info.run_id, {"bpb_ood_target": ratio_parts([2.0, 4.0], [1, 2], ("a", "b")),
                                                        "x.acc": ItemParts("mean", [1, 0, 1])})
        with tracker.run("adapt/old", parent_run_id=parent.info.run_id) as old:
            pass
    items = collect_gate_items(tracker.client, child.info.run_id)
    assert set(items) == {"bpb_ood_target", "source_model.bpb_ood_target", "x.acc"}
    assert items["bpb_ood_target"].ids == ("a", "b") and items["bpb_ood_target"].value() == pytest.approx(2.0)
    assert set(collect_gate_items(tracker.client, old.info.run_id)) == {"source_model.bpb_ood_target"}
