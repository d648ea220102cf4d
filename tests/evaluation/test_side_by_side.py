"""The side-by-side benchmark's parts on a tiny world: cloze scoring equals a by-hand sum of log-probabilities,
equal-content decoding counts the tokens of the same text for every model, out-of-domain fortunes are parsed into
one paragraph per cookie without attributions, and score_model names every metric the promotion gates read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.pipelines.tiny_world import build_source_model
from vocadapt.components.evaluation.cloze import ClozeItem
from vocadapt.components.evaluation.cloze_scoring import continuation_logprobs, score_cloze
from vocadapt.components.evaluation.decode_timing import (
    compare_on_documents, decode_seconds, equal_content_speed_up, equal_content_timing,
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, fixture_corpora):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = build_source_model(tmp_path_factory.mktemp("tiny"), [fixture_corpora["it.train"]])
    return AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


def test_continuation_logprob_is_the_sum_over_the_continuation_tokens(tiny):
    model, tokenizer = tiny
    context, continuation = "La casa è", "molto grande"
    joint = tokenizer(f"{context} {continuation}", add_special_tokens=False)["input_ids"]
    context_ids = tokenizer(context, add_special_tokens=False)["input_ids"]
    shared = next((i for i, (a, b) in enumerate(zip(context_ids, joint)) if a != b), min(len(context_ids), len(joint)))
    ids = torch.tensor([[tokenizer.bos_token_id, *joint]])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0, :-1].float(), dim=-1)
    expected = sum(float(logp[position, ids[0, position + 1]]) for position in range(shared, len(joint)))
    (scored,) = continuation_logprobs(model, tokenizer, [(context, continuation)])
    assert scored == pytest.approx(expected, abs=1e-4)
    batched = continuation_logprobs(model, tokenizer, [(context, continuation), ("Un", "altro testo più lungo")],
                                    batch_size=2)
    assert batched[0] == pytest.approx(scored, abs=1e-4)  # right padding does not change a row's score


def test_score_cloze_picks_the_highest_byte_normalised_choice(tiny):
    model, tokenizer = tiny
    choices = ["la casa è grande", "il gatto dorme sul divano", "oggi piove", "domani si parte"]
    sums = continuation_logprobs(model, tokenizer, [("Questa mattina", c) for c in choices])
    per_byte = [score / len(choice.encode()) for score, choice in zip(sums, choices)]
    best_bytes, best_sum = per_byte.index(max(per_byte)), sums.index(max(sums))
    items = [ClozeItem("a", "Questa mattina", choices, best_bytes), ClozeItem("b", "Questa mattina", choices, best_sum)]
    scores = score_cloze(model, tokenizer, items)
    assert scores["acc_bytes"] == (1.0 if best_bytes == best_sum else 0.5)
    assert scores["acc"] == (1.0 if best_bytes == best_sum else 0.5)
    with pytest.raises(ValueError, match="no cloze items"):
        score_cloze(model, tokenizer, [])


def test_equal_content_timing_decodes_the_same_text_for_every_model(tiny):
    model, tokenizer = tiny
    text = "La casa è molto grande e il giardino è pieno di fiori."
    timing = equal_content_timing({"a": (model, tokenizer), "b": (model, tokenizer)}, text, repeats=2)
    tokens = len(tokenizer(text, add_special_tokens=False)["input_ids"])
    assert timing["a"]["tokens"] == timing["b"]["tokens"] == tokens
    assert timing["a"]["seconds"] > 0 and decode_seconds(model, [1, 2, 3]) > 0
    ratio = equal_content_speed_up({"tokens": 10, "seconds": 1.0}, {"tokens": 15, "seconds": 1.6})
    assert ratio == {"speed_up": pytest.approx(1.6), "token_ratio": pytest.approx(1.5)}
    with pytest.raises(ValueError, match="repeats"):
        equal_content_timing({"a": (model, tokenizer)}, text, repeats=0)


def test_compare_on_documents_joins_the_documents_up_to_the_characters(tiny):
    model, tokenizer = tiny
    documents = ["La casa è molto grande.", "  ", "Il giardino è pieno di fiori."]
    ratios = compare_on_documents((model, tokenizer), (model, tokenizer), documents, characters=30, repeats=1)
    assert ratios["token_ratio"] == 1.0 and ratios["speed_up"] > 0
    text = "La casa è molto grande. Il giardino è pieno di fiori."[:30]
    assert equal_content_timing({"a": (model, tokenizer)}, text, repeats=1)["a"]["tokens"] == len(
        tokenizer(text, add_special_tokens=False)["input_ids"])
    assert compare_on_documents((model, tokenizer), (model, tokenizer), documents, characters=0, repeats=1) == {}
    assert compare_on_documents((model, tokenizer), (model, tokenizer), ["", " "], characters=30, repeats=1) == {}


def test_fortune_files_become_one_paragraph_per_cookie(tmp_path):
    from vocadapt.platform.assets.out_of_domain import _cookies, out_of_domain_documents

    (tmp_path / "italia").write_bytes(
        "Il cervello e' un organo favoloso.  Comincia a lavorare\nla mattina.\n\t\t-- Robert Frost\n%\n"
        "Perché no?\n%\n".encode("latin-1"))
    assert _cookies(tmp_path / "italia") == ["Il cervello e' un organo favoloso. Comincia a lavorare la mattina.",
                                             "Perché no?"]
    with pytest.raises(Exception, match="evaluation.out_of_domain: false"):
        out_of_domain_documents("xx", home=tmp_path)


def test_score_model_names_what_the_gates_read(tiny, fixture_corpora, tmp_path, capsys):
    from vocadapt.pipelines.side_by_side import ItemSettings, SourceVocabulary, build_items, score_model

    model, tokenizer = tiny
    pairs = [json.loads(line) for line in Path(fixture_corpora["it-en.validation"]).read_text().splitlines()]
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs[:20]))
    (tmp_path / "shots.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs[20:30]))
    documents = fixture_corpora["it.validation"].read_text().splitlines()
    settings, parallel = ItemSettings(items=4, seed=0, max_new_tokens=6), (tmp_path / "test.jsonl",
                                                                          tmp_path / "shots.jsonl")
    items = build_items(language="it", source_language="en", documents=documents, settings=settings,
                        parallel=parallel, out_of_domain={"target": documents[:3]})
    again = build_items(language="it", source_language="en", documents=documents, settings=settings,
                        parallel=parallel)
    assert items.cloze == again.cloze and items.translation == again.translation  # same data and seed, same items
    assert all(item["prompt"].startswith("Traduci dall'Inglese all'Italiano") for item in items.translation)
    metrics = score_model(model, tokenizer, items, source=SourceVocabulary(new_token_ids={5, 6}),
                          prefix="source_model.")
    assert set(metrics) == {"source_model.benchmark.side_by_side_cloze_it.acc_bytes",
                            "source_model.benchmark.side_by_side_translation_en_it.chrf",
                            "source_model.generation.tokens_per_character",
                            "source_model.generation.percent_generated_new", "source_model.bpb_ood_target"}
    # every part scored says how far it is, named for the model (minutes per model on a CPU without AMX)
    bars = capsys.readouterr().err
    assert "source model: cloze it" in bars and "source model: it out-of-domain bits per byte" in bars
    with_source = score_model(model, tokenizer, items, source=SourceVocabulary(tokenizer))
    # the model's own tokenizer as the source: greedy text is re-tokenized about as it was generated
    assert abs(with_source["generation.same_text_token_saving"]) < 0.5
    assert "adapted model: cloze it" in capsys.readouterr().err


def test_same_text_token_saving_compares_tokenizations_of_the_same_text(tiny):
    """Only the pieces a model chose count: the same characters in fewer tokens save tokens, in more pieces than the
    source tokenizer would use they cost some; what the text says does not matter."""
    from vocadapt.components.evaluation.efficiency import GenerationRecord, same_text_token_saving

    _, tokenizer = tiny
    text = "la casa è molto grande e la finestra è aperta"
    canonical = tokenizer(text, add_special_tokens=False)["input_ids"]
    halved = GenerationRecord([text], [canonical[: len(canonical) // 2]], seconds=1.0)  # as if tokens were longer
    assert same_text_token_saving(GenerationRecord([text], [canonical], 1.0), tokenizer) == 0.0
    assert same_text_token_saving(halved, tokenizer) == pytest.approx(1 - (len(canonical) // 2) / len(canonical))
    assert same_text_token_saving(GenerationRecord([text + " " + text], [canonical * 2], 1.0), tokenizer) \
        == pytest.approx(1 - 2 * len(canonical) / len(tokenizer(text + " " + text, add_special_tokens=False)["input_ids"]))
    assert same_text_token_saving(GenerationRecord([text], [canonical * 2], 1.0), tokenizer) == -1.0  # spelled out
    assert same_text_token_saving(GenerationRecord([""], [[]], 1.0), tokenizer) == 0.0
