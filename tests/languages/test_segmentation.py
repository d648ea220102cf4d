"""Scripts, word rules and tokenizer settings by script: the parts of language awareness that need no model."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vocadapt.components.tokenizers.language_settings import tokenizer_settings_for
from vocadapt.components.tokenizers.segmentation import (
    ZERO_WIDTH_SPACE,
    detect_script,
    is_spaceless,
    script_of_character,
    segmentation_for,
)


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize(
    "name, script",
    [("hi.train", "Devanagari"), ("ja.train", "Japanese"), ("km.train", "Khmer"), ("it.train", "Latin"),
     ("en.train", "Latin")],
)
def test_script_is_detected_from_the_fixture_slices(fixture_corpora, name, script):
    assert detect_script(_lines(fixture_corpora[name])) == script


def test_characters_map_to_their_scripts():
    assert [script_of_character(c) for c in "aαक漢あアកก"] == [
        "Latin", "Greek", "Devanagari", "Han", "Hiragana", "Katakana", "Khmer", "Thai"]
    assert script_of_character(" ") is None and script_of_character("7") is None and script_of_character("。") is None
    assert detect_script(["中文的句子没有空格"]) == "Han"  # Han without kana is not Japanese
    with pytest.raises(ValueError, match="language code"):
        detect_script(["123 ... !!"])


def test_word_rules_follow_the_script(fixture_corpora):
    hindi = segmentation_for("hi", _lines(fixture_corpora["hi.train"]))
    assert hindi.words_delimited and hindi.spaces_between_words
    japanese = segmentation_for("ja", _lines(fixture_corpora["ja.train"]))
    assert not japanese.words_delimited and japanese.count_words(["日本語 の 文"]) is None
    assert "not delimited" in japanese.rule
    khmer_lines = _lines(fixture_corpora["km.train"])
    khmer = segmentation_for("km", khmer_lines)
    assert khmer.words_delimited and not khmer.spaces_between_words and "U+200B" in khmer.rule
    # U+200B is not whitespace to Python: a whitespace split would undercount Khmer words by far
    assert khmer.count_words(khmer_lines) > 2 * sum(len(line.split()) for line in khmer_lines)
    # Khmer text without the marks (or no text at all) has no countable words
    assert not segmentation_for("km", [line.replace(ZERO_WIDTH_SPACE, "") for line in khmer_lines]).words_delimited
    assert not segmentation_for("km").words_delimited
    assert "syllables" in segmentation_for("vi").rule


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from("ab \n\tçé"), max_size=30), min_size=1, max_size=5))
def test_spaced_scripts_count_whitespace_words(documents):
    assert segmentation_for("it").count_words(documents) == sum(len(d.split()) for d in documents)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(alphabet="កខគ", min_size=1, max_size=6), min_size=2, max_size=8))
def test_zero_width_spaces_separate_khmer_words(words):
    text = ZERO_WIDTH_SPACE.join(words)
    assert segmentation_for("km", [text]).count_words([text]) == len(words)


@pytest.mark.parametrize(
    "language, expected",
    [
        ("ja", {"kind": "spm-bpe", "character_coverage": 0.9995}),
        ("zh-cn", {"kind": "spm-bpe", "character_coverage": 0.9995}),
        ("km", {"kind": "spm-bpe", "character_coverage": 0.9995}),
        ("dz", {"kind": "spm-bpe", "character_coverage": 0.9995}),
        ("hi", {"kind": "spm-bpe", "character_coverage": 1.0}),
        ("ta", {"kind": "spm-bpe", "character_coverage": 1.0}),
        ("ko", {"kind": "bytelevel-bpe"}),
        ("it", {"kind": "bytelevel-bpe"}),
        ("el", {"kind": "bytelevel-bpe"}),
    ],
)
def test_tokenizer_settings_suit_the_script(language, expected):
    assert tokenizer_settings_for(language) == expected
    assert tokenizer_settings_for(language, "auto") == expected
    assert is_spaceless(language) == (expected.get("character_coverage") == 0.9995)


def test_an_explicit_kind_is_kept_and_an_unknown_one_refused():
    assert tokenizer_settings_for("ja", "bytelevel-bpe") == {"kind": "bytelevel-bpe"}
    assert tokenizer_settings_for("it", "spm-unigram") == {"kind": "spm-unigram", "character_coverage": 1.0}
    with pytest.raises(ValueError, match="unknown tokenizer kind 'bpe'.*bytelevel-bpe"):
        tokenizer_settings_for("it", "bpe")
