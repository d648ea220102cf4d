"""The corpus checks of `adapt` step 1, and the language id under them, on the committed fixture slices."""

from __future__ import annotations

import json

import pytest

from vocadapt.components.corpora import AlignedUnit, keep_language
from vocadapt.components.language_id import fasttext_label, find_lid_model, identify_languages, language_shares
from vocadapt.components.errors import UserError
from vocadapt.platform.data.corpus_checks import CorpusCheckError, check_corpus


def test_lid_model_found_and_labels_italian_and_english():
    assert find_lid_model().name == "lid.176.ftz"
    lines = ["Scegliete Strumenti - Opzioni e poi fate clic sulla scheda.", "Choose Tools - Options."]
    assert identify_languages(lines) == ["it", "en"]
    assert identify_languages([]) == []


def test_language_shares_ignore_blank_lines_and_sum_to_one():
    shares = language_shares(["Il gatto dorme sul divano.", "", "  ", "The cat sleeps on the sofa.", "Il cane abbaia."])
    assert shares["it"] == pytest.approx(2 / 3) and shares["en"] == pytest.approx(1 / 3)
    assert sum(shares.values()) == pytest.approx(1.0)
    assert language_shares([]) == {}


@pytest.mark.parametrize(
    ("code", "label"), [("it", "it"), ("pt-br", "pt"), ("zh-CN", "zh"), ("en_us", "en"), ("dz", "bo")]
)
def test_language_codes_map_to_lid_labels(code, label):
    assert fasttext_label(code) == label


def test_keep_language_counts_what_it_drops():
    units = [AlignedUnit(f"k:{i}", "s", {"it": text}) for i, text in enumerate(["uno", "two", "tre", "four"])]
    result = keep_language(units, "it", "it", lambda texts: ["it" if t in ("uno", "tre") else "en" for t in texts])
    assert [u.key for u in result.kept] == ["k:0", "k:2"]
    assert result.dropped_by_label == {"en": 2} and result.dropped == 2


def test_italian_fixture_passes_and_report_is_json(fixture_corpora):
    report = check_corpus([fixture_corpora["it.train"], fixture_corpora["it.validation"]], "it", min_lines=100)
    assert report.passed and report.expected_label == "it"
    first = report.files[0]
    assert first.lines == 400 and first.sampled_lines == 400 and first.language_share >= 0.95
    assert json.loads(json.dumps(report.to_dict()))["passed"] is True


def test_english_given_as_italian_fails_naming_file_and_fix(fixture_corpora):
    with pytest.raises(CorpusCheckError) as caught:
        check_corpus([fixture_corpora["it.train"], fixture_corpora["en.train"]], "it", min_lines=100)
    message = str(caught.value)
    assert str(fixture_corpora["en.train"]) in message and str(fixture_corpora["it.train"]) not in message
    assert "sampled lines are in it" in message and "en 100%" in message and "target.language" in message
    assert isinstance(caught.value, UserError)


def test_sample_is_seeded(fixture_corpora):
    first = check_corpus(fixture_corpora["it.train"], "it", min_lines=10, sample_lines=50, seed=3)
    again = check_corpus(fixture_corpora["it.train"], "it", min_lines=10, sample_lines=50, seed=3)
    assert first == again and first.files[0].sampled_lines == 50


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "does not exist"),
        (b"", "empty"),
        (b"\n  \n", "empty"),
        ("Una riga in italiano, scritta bene.\n".encode() * 5 + b"\xff\xfe bad\n", "not UTF-8 (byte 180, line 6"),
        ("Una riga in italiano, scritta bene.\n".encode() * 5, "5 non-blank lines, fewer than the 100"),
    ],
)
def test_bad_files_fail_clearly(tmp_path, content, expected):
    path = tmp_path / "corpus.txt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(CorpusCheckError, match="corpus.txt") as caught:
        check_corpus([path], "it", min_lines=100)
    assert expected in str(caught.value)


def test_folder_and_no_files_fail(tmp_path):
    with pytest.raises(CorpusCheckError, match="not a regular file"):
        check_corpus([tmp_path], "it")
    with pytest.raises(CorpusCheckError, match="no corpus files"):
        check_corpus([], "it")


def test_expectation_suite_passes_on_italian_splits_and_fails_on_english(fixture_corpora, tmp_path):
    from vocadapt.platform.data.corpus_checks import expectation_suite_results

    bad = tmp_path / "bad.txt"
    bad.write_bytes("Una riga in italiano.\n".encode() * 3 + b"\xff broken\n")
    results = expectation_suite_results(
        {
            "train": [fixture_corpora["it.train"]],
            "validation": [fixture_corpora["it.validation"]],
            "english": [fixture_corpora["en.validation"]],
            "broken": [bad],
        },
        "it",
        min_lines=100,
    )
    assert json.loads(json.dumps(results))["success"] is False
    assert results["splits"]["train"]["success"] and results["splits"]["validation"]["success"]
    assert [f for f in results["failures"] if f.startswith("english")] == [
        "english: expect_column_values_to_be_in_set on language"
    ]
    broken = {f.split(": ", 1)[1] for f in results["failures"] if f.startswith("broken")}
    assert {"expect_table_row_count_to_be_between", "expect_column_values_to_be_in_set on utf8",
            "expect_column_proportion_of_unique_values_to_be_between on text"} <= broken


@pytest.mark.parametrize("language", ["hi", "ja", "km"])
def test_non_latin_fixtures_pass_as_themselves_and_fail_as_italian(fixture_corpora, language):
    files = [fixture_corpora[f"{language}.train"], fixture_corpora[f"{language}.validation"]]
    assert check_corpus(files, language, min_lines=100).passed
    with pytest.raises(CorpusCheckError, match=f"found {language} 100%"):
        check_corpus(files, "it", min_lines=100)
    pairs = [json.loads(line) for line in fixture_corpora[f"{language}-en.validation"].read_text("utf-8").splitlines()]
    lines = fixture_corpora[f"{language}.validation"].read_text("utf-8").splitlines()
    assert [pair[language] for pair in pairs] == lines
