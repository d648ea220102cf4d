"""Devanagari, Japanese and Khmer fixture slices through tokenizer training (kind by script) and language-aware
fertility, against an English-only source tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.pipelines.tiny_world import build_source_model
from vocadapt.components.tokenizers.fertility import ParallelText
from vocadapt.components.tokenizers.language_fertility import (
    LanguageDocuments, language_fertility_report, language_fertility_table)
from vocadapt.components.tokenizers.language_settings import tokenizer_settings_for
from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, train_tokenizer

LANGUAGES = ("hi", "ja", "km")


@pytest.fixture(scope="module")
def source_tokenizer(tmp_path_factory, fixture_corpora):
    from transformers import AutoTokenizer

    folder = build_source_model(tmp_path_factory.mktemp("source"), [fixture_corpora["en.train"]])
    return AutoTokenizer.from_pretrained(str(folder))


@pytest.fixture(scope="module")
def target_tokenizers(tmp_path_factory, fixture_corpora, source_tokenizer):
    folder = tmp_path_factory.mktemp("targets")
    return {
        language: train_tokenizer(
            [fixture_corpora[f"{language}.train"]],
            TokenizerTrainingSpec(vocab_size=1500, like=source_tokenizer, **tokenizer_settings_for(language)),
            folder / language, show_progress=False,
        )
        for language in LANGUAGES
    }  # fmt: skip


def _pairs(path: Path, language: str) -> tuple[list[str], list[str]]:
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r[language] for r in records], [r["en"] for r in records]


@pytest.mark.parametrize("language", LANGUAGES)
def test_target_tokenizer_kind_suits_the_script_and_round_trips(language, target_tokenizers, fixture_corpora):
    tokenizer = target_tokenizers[language]
    model_type = json.loads(tokenizer.backend_tokenizer.to_str())["model"]
    # sentencepiece with byte fallback: spaceless scripts and abugidas (Devanagari vowel signs break GPT-2's regex)
    assert model_type.get("byte_fallback", False) is True
    documents, _ = _pairs(fixture_corpora[f"{language}-en.validation"], language)
    for document in documents[:40]:
        ids = tokenizer(document, add_special_tokens=False)["input_ids"]
        assert tokenizer.decode(ids) == document
    used = {token_id for d in documents for token_id in tokenizer(d, add_special_tokens=False)["input_ids"]}
    assert tokenizer.unk_token_id not in used


@pytest.mark.parametrize("language", LANGUAGES)
def test_language_fertility_of_source_and_target(language, source_tokenizer, target_tokenizers, fixture_corpora):
    documents, english = _pairs(fixture_corpora[f"{language}-en.validation"], language)
    reports = language_fertility_table(
        {"source": source_tokenizer, "target": target_tokenizers[language]},
        LanguageDocuments(documents, language, reference=ParallelText(english, source_tokenizer)),
    )  # fmt: skip
    source, target = reports["source"], reports["target"]
    assert target.tokens_per_character < 0.8 * source.tokens_per_character  # a vocabulary of its own is cheaper
    assert target.parity < source.parity
    # parity is the tokens for the paragraphs over the source tokenizer's tokens for their English side
    english_tokens = sum(len(source_tokenizer(e, add_special_tokens=False)["input_ids"]) for e in english)
    assert source.reference_tokens == target.reference_tokens == english_tokens
    assert target.parity == pytest.approx(target.tokens / english_tokens)
    assert target.tokens_per_paragraph == pytest.approx(target.tokens / len(documents))
    assert target.tokens_per_byte == pytest.approx(target.tokens / sum(len(d.encode()) for d in documents))
    if language == "ja":  # no word boundaries in the text: no tokens per word, and the report says why
        assert target.words is None and target.tokens_per_word is None and "not delimited" in target.segmentation
    else:
        assert target.words > 0 and target.tokens_per_word == pytest.approx(target.tokens / target.words)
    if language == "km":  # words are counted at U+200B, not at spaces
        assert target.words > 2 * sum(len(d.split()) for d in documents)
    assert "tokens_per_word" not in target.metrics() or target.words_delimited
    assert target.script == {"hi": "Devanagari", "ja": "Japanese", "km": "Khmer"}[language]


def test_language_fertility_refuses_misaligned_references(source_tokenizer):
    with pytest.raises(ValueError, match="line-aligned"):
        language_fertility_report(source_tokenizer,
                                  LanguageDocuments(["日本語", "です"], "ja", reference=ParallelText(["x"])))
    with pytest.raises(ValueError, match="no documents"):
        language_fertility_report(source_tokenizer, LanguageDocuments([], "ja"))
