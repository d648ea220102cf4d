"""Pure evaluation metrics: chrF, ROUGE-L, efficiency and %Gen, speed-up, cloze items, prompts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vocadapt.components.evaluation.cloze import build_cloze_items, split_document
from vocadapt.components.evaluation.efficiency import (
    GenerationRecord,
    generation_efficiency,
    percent_generated_new,
    speed_up,
)
from vocadapt.components.evaluation.prompts import first_line, question_answering_prompt, translation_prompt
from vocadapt.components.evaluation.text_scores import chrf, rouge_l


def test_chrf_perfect_and_disjoint():
    assert chrf(["Ti amo così tanto."], ["Ti amo così tanto."]) == pytest.approx(100.0)
    assert chrf(["xyz qqq"], ["Ti amo così tanto."]) < 10
    partial = chrf(["Ti amo tanto."], ["Ti amo così tanto."])
    assert 10 < partial < 100


def test_rouge_l_keeps_accented_words():
    assert rouge_l(["la città è bella"], ["la città è bella"]) == pytest.approx(100.0)
    # the default rouge-score tokenizer would drop "è" and "à": here "citta" and "città" differ
    assert rouge_l(["la citta"], ["la città"]) == pytest.approx(50.0)


def test_scores_reject_mismatched_lists():
    with pytest.raises(ValueError, match="one per example"):
        chrf(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="at least one"):
        rouge_l([], [])


def test_generation_efficiency_counts_tokens_characters_examples():
    record = GenerationRecord(texts=["ciao", "buongiorno"], token_ids=[[5, 6], [7, 8, 9]], seconds=2.0)
    report = generation_efficiency(record, new_token_ids={6, 7})
    assert report["tokens_per_second"] == 2.5
    assert report["characters_per_second"] == 7.0
    assert report["examples_per_second"] == 1.0
    assert report["tokens_per_example"] == 2.5
    assert report["percent_generated_new"] == pytest.approx(40.0)


def test_speed_up_is_ratio_of_rates():
    adapted = {"tokens_per_second": 10.0, "characters_per_second": 60.0, "examples_per_second": 2.0}
    source = {"tokens_per_second": 10.0, "characters_per_second": 30.0, "examples_per_second": 1.0}
    assert speed_up(adapted, source) == {"tokens_per_second": 1.0, "characters_per_second": 2.0,
                                         "examples_per_second": 2.0}
    with pytest.raises(ValueError, match="generated nothing"):
        speed_up(adapted, {**source, "tokens_per_second": 0.0})


def test_record_rejects_bad_timing():
    with pytest.raises(ValueError, match="positive"):
        GenerationRecord(["a"], [[1]], 0.0)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.integers(0, 50), max_size=8), max_size=6), st.sets(st.integers(0, 50)))
def test_percent_generated_new_is_a_share(token_ids, new):
    share = percent_generated_new(token_ids, new)
    assert 0.0 <= share <= 100.0
    assert percent_generated_new(token_ids, set(range(51))) == (100.0 if any(token_ids) else 0.0)


DOCS = [f"documento numero {i} " + " ".join(f"parola{i}_{j}" for j in range(8 + i % 7)) for i in range(30)]


def test_cloze_items_hold_the_true_continuation_once():
    items = build_cloze_items(DOCS, n_items=10, n_choices=4, seed=3)
    assert len(items) == 10
    for item in items:
        index = int(item.key.split(":")[1])
        context, truth = split_document(DOCS[index])
        assert item.context == context and item.choices[item.label] == truth
        assert len(set(item.choices)) == 4 and item.choices.count(truth) == 1


def test_cloze_items_are_deterministic_and_seed_dependent():
    assert build_cloze_items(DOCS, n_items=10, seed=1) == build_cloze_items(DOCS, n_items=10, seed=1)
    assert build_cloze_items(DOCS, n_items=10, seed=1) != build_cloze_items(DOCS, n_items=10, seed=2)


def test_cloze_labels_are_not_all_the_same():
    labels = {item.label for item in build_cloze_items(DOCS, n_items=30, seed=0)}
    assert len(labels) > 1


def test_cloze_too_few_documents_is_a_clear_error():
    with pytest.raises(ValueError, match="lower min_words"):
        build_cloze_items(DOCS[:3], n_items=3, n_choices=4)


def test_translation_prompt_matches_sava_table_8():
    shot = {"en": "I love you so much.", "it": "Ti amo così tanto."}
    prompt = translation_prompt("Good morning.", "en", "it", [shot])
    assert prompt == ("Traduci dall'Inglese all'Italiano\nText: I love you so much.\nTranslation: Ti amo così tanto."
                      "\n\nText: Good morning.\nTranslation:")
    assert translation_prompt("Buongiorno.", "it", "en").startswith("Translate from Italian to English\nText:")


def test_question_answering_prompt_matches_sava_table_9():
    prompt = question_answering_prompt("Il terremoto del 2008.", "In quale anno?")
    assert prompt == "Contesto: Il terremoto del 2008.\nDomanda: In quale anno?\nRisposta:"
    assert first_line(" 2008\nDomanda: altro") == "2008"
