"""A tiny `vocadapt adapt` for a Devanagari, a Japanese and a Khmer corpus (the language is one override), and the
language matrix on a tiny model with MLflow children tagged by language."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.pipelines.tiny_world import build_source_model, tiny_config_overrides
from vocadapt.cli.app import app

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, fixture_corpora) -> Path:
    return build_source_model(tmp_path_factory.mktemp("tiny-source"), [fixture_corpora["en.train"]])


@pytest.mark.parametrize("language, kind", [("hi", "bytelevel-bpe"), ("ja", "spm-bpe"), ("km", "spm-bpe")])
def test_tiny_adapt_for_each_script(language, kind, tiny_model, fixture_corpora, tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    corpora = dict(fixture_corpora, **{"it.train": fixture_corpora[f"{language}.train"],
                                       "it.validation": fixture_corpora[f"{language}.validation"]})
    overrides = tiny_config_overrides(
        tiny_model, corpora, tmp_path, **{
            "target.language": language, "tokenizer.kind": kind, "tokenizer.vocab_size": "1500",
            "lapt.enabled": "false", "tracking.register_best": "false", "evaluation.max_documents": "8",
            "tracking.tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}",
        },
    )  # fmt: skip
    summary = tmp_path / "summary.json"
    args = ["adapt", *[arg for override in overrides for arg in ("--set", override)], "--json", str(summary)]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(summary.read_text())
    fertility = report["fertility"]
    source, target = fertility[f"source_tokenizer.{language}"], fertility[f"target_tokenizer.{language}"]
    assert target["tokens_per_character"] < source["tokens_per_character"]
    assert set(report["methods"]) == {"random", "fvt"}
    assert all(bpb["target_zero_shot"] > 0 for bpb in report["methods"].values())
    saved = Path(report["output_dir"], report["best_method"], "initialised")
    tokenizer = AutoTokenizer.from_pretrained(str(saved))
    assert json.loads((saved / "config.json").read_text())["vocab_size"] >= len(tokenizer) != 400  # not the source's
    held_out = fixture_corpora[f"{language}.validation"].read_text(encoding="utf-8").splitlines()[0]
    assert tokenizer.decode(tokenizer(held_out, add_special_tokens=False)["input_ids"]) == held_out


def test_language_matrix_on_a_tiny_model(tiny_model, fixture_corpora, tmp_path, monkeypatch):
    import mlflow

    from vocadapt.pipelines.languages import LanguageCorpus, MatrixSettings, read_pairs, run_language_matrix
    from vocadapt.platform.tracking import Tracker

    settings = MatrixSettings(vocab_size=1500, tokenizer_training_lines=None, expansion_k=50,
                              expansion_ranking_lines=200, protect_lines=20, fertility_documents=40, bpb_documents=4,
                              max_length=32, batch_size=4, generation_prompts=2, max_new_tokens=3)
    corpora = [
        LanguageCorpus(language, (fixture_corpora[f"{language}.train"],),
                       read_pairs(fixture_corpora[f"{language}-en.validation"], language), {"lines": {"train": 300}})
        for language in ("ja", "km")
    ]
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("VOCADAPT_HOME", str(tmp_path / "empty-home"))  # no embedded English word list to protect
    result = run_language_matrix(corpora, tiny_model, tmp_path / "out", Tracker(uri, "languages-test", tmp_path),
                                 settings=settings)
    rows = {row["language"]: row for row in result.rows}
    assert rows["ja"]["tokenizer"]["kind"] == rows["km"]["tokenizer"]["kind"] == "spm-bpe"
    assert rows["ja"]["fertility"]["target"]["tokens_per_word"] is None
    assert rows["km"]["fertility"]["target"]["tokens_per_word"] > 0
    for row in rows.values():
        fertility = row["fertility"]
        assert fertility["target"]["parity"] < fertility["source"]["parity"]
        assert 0 < row["tokenizer"]["expansion_added"] <= settings.expansion_k
        assert fertility["expanded"]["tokens"] < fertility["source"]["tokens"]
        assert {"source", "fvt", "random"} == set(row["bits_per_byte"])
        assert row["generation"]["speed_up.characters_per_second"] > 0
        assert row["protection"]["english_lines"] == settings.protect_lines and row["protection"]["word_list"] is None
        assert "no embedded English word list" in row["protection"]["note"]  # says so, and the lines still hold
    table = (tmp_path / "out" / "languages.md").read_text()
    assert "| ja | Japanese | not delimited |" in table and "| km | Khmer | delimited |" in table
    assert "20 English held-out lines (no embedded English word list" in table
    assert json.loads((tmp_path / "out" / "languages.json").read_text()) == result.rows

    client = mlflow.tracking.MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("languages-test").experiment_id])
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == result.parent_run_id]
    assert {r.data.tags["vocadapt.target_language"] for r in children} == {"ja", "km"}
    assert all("fertility.target.tokens_per_character" in r.data.metrics for r in children)
    assert {r.data.params["protection.word_list"] for r in children} == {"None"}
    assert all(r.info.status == "FINISHED" for r in runs)
    # the corpus expectation suite on each language's training text, saved with the matrix's run
    matrix = client.get_run(result.parent_run_id).data.metrics
    assert matrix["corpus.expectations_evaluated"] == matrix["corpus.expectations_passed"] == 2 * 5
    assert matrix["corpus.ja_training.expectations_passed"] == matrix["corpus.km_training.expectations_passed"] == 5
    checked = json.loads(Path(client.download_artifacts(result.parent_run_id, "corpus_checks/expectations.json",
                                                        str(tmp_path / "checks"))).read_text())
    assert set(checked["corpora"]) == {"ja training", "km training"} and checked["success"]
    km = {r["expectation"]: r for r in checked["expectations"] if r["corpus"] == "km training"}
    assert km["expect_column_values_to_be_in_set on language"]["measure"] == "share of lines labelled km"


def test_language_matrix_stops_on_a_failed_expectation_before_any_run(tiny_model, fixture_corpora, tmp_path):
    import mlflow

    from vocadapt.pipelines.languages import LanguageCorpus, MatrixSettings, read_pairs, run_language_matrix
    from vocadapt.platform.data.corpus_checks import CorpusExpectationError
    from vocadapt.platform.tracking import Tracker

    lines = fixture_corpora["km.train"].read_text(encoding="utf-8").splitlines()[:150]
    repeated = tmp_path / "km-repeated.txt"
    repeated.write_text("\n".join(lines + lines) + "\n", encoding="utf-8")  # half the lines repeat
    corpora = [LanguageCorpus("km", (repeated,), read_pairs(fixture_corpora["km-en.validation"], "km"))]
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with pytest.raises(CorpusExpectationError) as caught:
        run_language_matrix(corpora, tiny_model, tmp_path / "out", Tracker(uri, "languages-test", tmp_path),
                            settings=MatrixSettings(bpb_documents=4))
    message = str(caught.value)
    assert "km training" in message and "expect_column_proportion_of_unique_values_to_be_between on text" in message
    assert "MatrixSettings.corpus_max_duplicate_share" in message
    assert not (tmp_path / "out").exists()
    client = mlflow.tracking.MlflowClient(uri)
    assert not client.search_runs([e.experiment_id for e in client.search_experiments()])


def test_languages_command_refuses_english_and_unbuilt_languages(tmp_path, monkeypatch):
    monkeypatch.setenv("VOCADAPT_HOME", str(tmp_path / "empty-home"))
    result = CliRunner().invoke(app, ["languages", "--lang", "en"])
    assert result.exit_code == 2 and "reference language" in result.output
    result = CliRunner().invoke(app, ["languages", "--lang", "km", "--quick"])
    assert result.exit_code == 2 and "vocadapt assets" in result.output
    assert not (tmp_path / "runs").exists()
