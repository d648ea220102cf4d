"""Every target language of a multilingual model is measured and gated on its own: out-of-domain bits per byte
(``bpb_ood_target_<code>``), generation (``generation.<code>.*``), fertility; one gate row per language, a
promotion needs all of them; the one-language form keeps its names. A language with no out-of-domain text is
refused before any work when its gate would need it."""

from __future__ import annotations

from pathlib import Path

import pytest

from vocadapt.components.evaluation.bootstrap import ratio_parts
from vocadapt.components.errors import UserError
from vocadapt.platform.config import load_config
from vocadapt.platform.registry.gates import PromotionDecision, PromotionGates, evaluate_gates, gate_table, gated_languages

ONE_LANGUAGE_GATES = ["target bits per byte", "source-language bits per byte", "target fertility",
                      "generated tokens per character", "generated tokens saved on the same text", "benchmarks"]
PER_LANGUAGE = ("target bits per byte", "target fertility", "generated tokens per character",
                "generated tokens saved on the same text")


def _pair(metrics: dict, items: dict, key: str, candidate: list[float], source: list[float], units: int = 10,
          *, source_key: str | None = None) -> None:
    """Per-item ratio parts (value * units over units) for the candidate under ``key`` and the source model under
    ``source_key`` (default ``source_model.<key>``), and their totals as metrics."""
    ids = [f"item{i}" for i in range(len(candidate))]
    source_key = source_key or f"source_model.{key}"
    for name, values in ((key, candidate), (source_key, source)):
        items[name] = ratio_parts([value * units for value in values], [units] * len(values), ids)
        metrics[name] = sum(values) / len(values)


def _language_world(languages: list[str], worse: str | None = None) -> tuple[dict, dict]:
    """Metrics and item parts where every language's candidate is clearly better than the source model, except
    ``worse``, whose out-of-domain bits per byte are clearly worse."""
    metrics, items = {}, {}
    for position, code in enumerate(languages):
        stream = "target" if position == 0 else f"target_{code}"
        scope = "" if position == 0 else f"{code}."
        ood = [1.5, 1.6, 1.4, 1.55, 1.45, 1.5] if code != worse else [2.5, 2.6, 2.4, 2.55, 2.45, 2.5]
        _pair(metrics, items, f"bpb_ood_{stream}", ood, [2.0, 2.1, 1.9, 2.05, 1.95, 2.0])
        _pair(metrics, items, f"fertility.target_tokenizer.{code}.tokens_per_word", [1.2, 1.3, 1.1, 1.25, 1.2, 1.15],
              [2.0, 2.1, 1.9, 2.0, 2.1, 1.95], source_key=f"fertility.source_tokenizer.{code}.tokens_per_word")
        _pair(metrics, items, f"generation.{scope}tokens_per_character", [0.2, 0.21, 0.19, 0.2, 0.22, 0.2],
              [0.4, 0.41, 0.39, 0.4, 0.42, 0.4])
        saving = f"generation.{scope}same_text_token_saving"
        items[saving] = ratio_parts([6, 5, 6, 7, 6, 5], [10] * 6, [f"item{i}" for i in range(6)], kind="saving")
        metrics[saving] = float(items[saving].value())
    _pair(metrics, items, "bpb_ood_source", [1.0, 1.1, 0.9, 1.0, 1.05, 0.95], [1.0, 1.1, 0.9, 1.0, 1.05, 0.95])
    return metrics, items


def test_one_language_keeps_its_gate_names_whether_given_as_a_code_or_a_list_of_one():
    metrics, items = _language_world(["it"])
    by_code = evaluate_gates(metrics, PromotionGates(), "it", items)
    by_list = evaluate_gates(metrics, PromotionGates(), ["it"], items)
    assert [gate.gate for gate in by_code] == [gate.gate for gate in by_list] == ONE_LANGUAGE_GATES
    assert all(gate.verdict == "pass" for gate in by_code), [(g.gate, g.verdict, g.detail) for g in by_code]


def test_every_language_has_its_own_gate_row_with_an_interval_and_all_must_pass():
    languages = ["it", "de", "ru"]
    metrics, items = _language_world(languages)
    results = {gate.gate: gate for gate in evaluate_gates(metrics, PromotionGates(), languages, items)}
    for gate in PER_LANGUAGE:
        for code in languages:
            row = results[f"{gate} ({code})"]
            assert row.verdict == "pass" and row.interval is not None, (row.gate, row.verdict, row.detail)
    assert "bpb_ood_target_de" in results["target bits per byte (de)"].detail
    assert "generation.ru.tokens_per_character" in results["generated tokens per character (ru)"].detail
    assert "source-language bits per byte" in results  # English once
    assert PromotionDecision("m", 1, "champion", list(results.values())).accepted

    metrics, items = _language_world(languages, worse="ru")  # one market's out-of-domain text got worse
    results = {gate.gate: gate for gate in evaluate_gates(metrics, PromotionGates(), languages, items)}
    assert results["target bits per byte (ru)"].verdict == "fail"
    assert results["target bits per byte (it)"].verdict == results["target bits per byte (de)"].verdict == "pass"
    assert not PromotionDecision("m", 1, "champion", list(results.values())).accepted


def test_a_language_whose_metrics_were_never_logged_fails_its_gate():
    metrics, items = _language_world(["it", "de"])
    results = {gate.gate: gate for gate in evaluate_gates(metrics, PromotionGates(), ["it", "de", "ru"], items)}
    assert results["target bits per byte (ru)"].verdict == "fail"
    assert "bpb_ood_target_ru" in results["target bits per byte (ru)"].detail


def test_the_gate_table_shows_one_row_per_language_and_gate():
    from rich.console import Console

    languages = ["it", "de", "ru"]
    metrics, items = _language_world(languages)
    console = Console(record=True, width=200)
    console.print(gate_table(PromotionDecision("m", 1, "champion",
                                               evaluate_gates(metrics, PromotionGates(), languages, items))))
    text = console.export_text()
    for gate in PER_LANGUAGE:
        for code in languages:
            assert f"{gate} ({code})" in text


def test_the_gated_languages_come_from_the_version_tags():
    assert gated_languages({"vocadapt.target_languages": "it,de,ru", "vocadapt.target_language": "it"}) == \
        ["it", "de", "ru"]
    assert gated_languages({"vocadapt.target_language": "de"}) == ["de"]
    assert gated_languages({}) == ["it"]


def test_every_target_language_gets_an_out_of_domain_stream():
    from vocadapt.platform.assets.out_of_domain import languages_without_out_of_domain, out_of_domain_streams

    config = load_config(None, ["target.languages=[it, de, ru, hi]"])
    assert out_of_domain_streams(config) == [("target", "it"), ("target_de", "de"), ("target_ru", "ru"),
                                             ("target_hi", "hi"), ("source", "en")]
    assert languages_without_out_of_domain(config) == ["hi"]  # Debian has fortunes in it, de, ru and en
    declared = load_config(None, ["target.languages=[it, hi]", "evaluation.out_of_domain_text.hi=[hi.txt]"])
    assert languages_without_out_of_domain(declared) == []


@pytest.mark.parametrize(("overrides", "refused"), [
    (["target.languages=[it, hi]"], True),
    (["target.languages=[it, hi]", "evaluation.out_of_domain_text.hi=[hi.txt]"], False),
    (["target.languages=[it, hi]", "tracking.register_best=false"], False),  # nothing is gated
    (["target.languages=[it, hi]", "evaluation.side_by_side_items=0"], False),  # nothing is scored out of domain
    (["target.language=hi"], False),  # one language: its gate reports the metric missing, as before
])
def test_a_gated_language_without_out_of_domain_text_is_refused_before_any_work(overrides, refused):
    from vocadapt.pipelines.preflight import check_every_language_has_out_of_domain

    config = load_config(None, overrides)
    if not refused:
        check_every_language_has_out_of_domain(config)
        return
    with pytest.raises(UserError, match=r"no out-of-domain text for target language\(s\) hi.*"
                                        r"evaluation.out_of_domain_text: \{hi: \[path/to/hi-text.txt\]\}"):
        check_every_language_has_out_of_domain(config)


def test_each_language_is_scored_on_its_own_prompts_and_out_of_domain_text(tmp_path, fixture_corpora):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tests.pipelines.tiny_world import build_source_model
    from vocadapt.pipelines.side_by_side import ItemSettings, SourceVocabulary, build_items, score_model

    folder = build_source_model(tmp_path / "model", [fixture_corpora["en.train"]], vocab_size=300)
    model, tokenizer = AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    lines = {code: Path(fixture_corpora[f"{code}.validation"]).read_text(encoding="utf-8").splitlines()
             for code in ("it", "hi", "en")}
    common = dict(source_language="en", settings=ItemSettings(items=3, seed=0, max_new_tokens=4, max_length=32))
    items = build_items(language="it", documents=lines["it"][:40], out_of_domain={
        "target": lines["it"][100:103], "target_hi": lines["hi"][90:93], "source": lines["en"][100:103]}, **common)
    hindi = build_items(language="hi", documents=lines["hi"][:40], **common)
    hindi.generation_scope = "hi"
    items.further = [hindi]
    parts = {}
    scores = score_model(model, tokenizer, items, source=SourceVocabulary(tokenizer), prefix="source_model.",
                         item_parts=parts)
    for key in ("bpb_ood_target", "bpb_ood_target_hi", "bpb_ood_source", "generation.tokens_per_character",
                "generation.hi.tokens_per_character", "generation.hi.same_text_token_saving",
                "benchmark.side_by_side_cloze_it.acc_bytes", "benchmark.side_by_side_cloze_hi.acc_bytes"):
        assert f"source_model.{key}" in scores and f"source_model.{key}" in parts, key
    # Hindi's prompts are its own cloze contexts: its generation parts pair with Hindi items, not Italian ones
    assert parts["source_model.generation.hi.tokens_per_character"].ids != \
        parts["source_model.generation.tokens_per_character"].ids
    assert parts["source_model.bpb_ood_target_hi"].ids != parts["source_model.bpb_ood_target"].ids
