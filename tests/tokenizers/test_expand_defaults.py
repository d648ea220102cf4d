"""`vocadapt tokenizer expand` protects the embedded English word list by default; opting out is explicit."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from vocadapt.cli.app import app


def _expand(source, target, corpus, out, *extra):
    arguments = ["tokenizer", "expand", "--source", source, "--target", target, "--top-k", 20, "--corpus", corpus,
                 "--out", out, "--json", *extra]
    return CliRunner().invoke(app, [str(argument) for argument in arguments])


def test_expand_protects_the_embedded_word_list_unless_told_not_to(embedded_assets, smollm2_tokenizer,
                                                                   fixture_corpora, tmp_path):
    from vocadapt.platform.assets.sources import word_list_path

    source = tmp_path / "smollm2"
    smollm2_tokenizer.save_pretrained(source)
    target = tmp_path / "it"
    trained = CliRunner().invoke(app, ["tokenizer", "train", "--corpus", str(fixture_corpora["it.train"]), "--kind",
                                       "bytelevel-bpe", "--vocab-size", "600", "--out", str(target), "--like",
                                       str(source)])
    assert trained.exit_code == 0, trained.output
    corpus = fixture_corpora["it.train"]
    embedded = word_list_path("embedded", "en", "test")
    default = _expand(source, target, corpus, tmp_path / "default")
    assert default.exit_code == 0, default.output
    assert json.loads(default.output)["protected_lexicon"] == ([str(embedded)] if embedded else [])
    opted_out = _expand(source, target, corpus, tmp_path / "none", "--no-protect-lexicon")
    assert opted_out.exit_code == 0, opted_out.output
    assert json.loads(opted_out.output)["protected_lexicon"] == []
    both = _expand(source, target, corpus, tmp_path / "both", "--no-protect-lexicon", "--protect-lexicon", embedded)
    assert both.exit_code == 2 and "contradict" in both.output and not (tmp_path / "both").exists()
