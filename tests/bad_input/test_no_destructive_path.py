"""An output that is an input, holds one or lies inside one is refused before anything is written, --overwrite
included, and the input is left byte for byte as it was: generated over the commands that write a folder from
inputs (init, tokenizer train, tokenizer expand) and over where the output sits."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from vocadapt.cli.app import app


def _fingerprint(root: Path) -> dict[str, str]:
    return {str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(root.rglob("*")) if path.is_file()}


def _commands(model: Path, tokenizer: Path, corpus: Path):
    """(command, its inputs by flag) with --out left to the test."""
    return {
        "init": (["init", "--source-model", str(model), "--target-tokenizer", str(tokenizer), "--method", "fvt",
                  "--corpus", str(corpus), "--overwrite"], {"--source-model": model, "--target-tokenizer": tokenizer,
                                                           "--corpus": corpus}),
        "tokenizer train": (["tokenizer", "train", "--kind", "bytelevel-bpe", "--vocab-size", "300", "--corpus",
                             str(corpus), "--overwrite"], {"--corpus": corpus}),
        "tokenizer expand": (["tokenizer", "expand", "--source", str(model), "--target", str(tokenizer),
                              "--no-protect-lexicon"], {"--source": model, "--target": tokenizer}),
    }


@settings(max_examples=30, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(["init", "tokenizer train", "tokenizer expand"]), data=st.data(),
       relation=st.sampled_from(["is", "holds", "inside"]))
def test_an_output_over_an_input_is_refused_and_the_input_kept(command, data, relation, sharded, fixture_corpora,
                                                                tmp_path_factory, monkeypatch):
    work = tmp_path_factory.mktemp("destructive")
    inputs = work / "inputs"
    model = inputs / "model"
    shutil.copytree(sharded.parent / "single", model)
    tokenizer = inputs / "tokenizer"
    shutil.copytree(sharded.parent / "single", tokenizer)
    corpus = inputs / "corpora" / "it.txt"
    corpus.parent.mkdir()
    shutil.copy(fixture_corpora["it.train"], corpus)
    args, named = _commands(model, tokenizer, corpus)[command]
    flag = data.draw(st.sampled_from(sorted(named)))
    target = named[flag]
    out = {"is": target, "holds": target.parent, "inside": target / "adapted" if target.is_dir() else None}[relation]
    if out is None:  # nothing lies inside a file: the output then holds it
        out = target.parent
    before, paths = _fingerprint(work), sorted(work.rglob("*"))
    monkeypatch.chdir(work)
    result = CliRunner().invoke(app, [*args, "--out", str(out)], catch_exceptions=False)
    output = " ".join(result.output.split())
    assert result.exit_code == 2, output
    assert "--out" in output and "input" in output and "nothing was written" in output, output
    assert _fingerprint(work) == before and sorted(work.rglob("*")) == paths  # inputs intact, nothing added
