"""Generated damage to a checkpoint folder (truncated, flipped, dropped, duplicated, mistyped files) is refused by
the one model-folder check before any work: through ``vocadapt init`` (exit 2, one ``error:`` line naming the file
or field, no ``--out`` written, no internal-error log) and through ``preflight`` of ``vocadapt adapt``'s config.

A new corruption is one function in ``corrupt_world.CORRUPTIONS``; every command that reads a model folder goes
through ``platform/model_loading.py::check_model_folder``, so the cases below cover them all.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests.bad_input.corrupt_world import CORRUPTIONS
from vocadapt.cli.app import app

pytestmark = pytest.mark.timeout(600)
SETTINGS = settings(max_examples=8, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _logs() -> set[str]:
    from vocadapt.cli.errors import logs_dir

    return {path.name for path in logs_dir().glob("*.log")}


def test_the_clean_sharded_checkpoint_passes(sharded):
    from vocadapt.platform.model_loading import check_model_folder

    check_model_folder(sharded, what="--source-model")


@pytest.mark.parametrize("corrupt", CORRUPTIONS, ids=[c.__name__ for c in CORRUPTIONS])
@SETTINGS
@given(data=st.data())
def test_a_damaged_checkpoint_is_refused_before_any_work(corrupt, data, sharded, tmp_path_factory):
    work = tmp_path_factory.mktemp("case")
    model = work / "model"
    shutil.copytree(sharded, model)
    named = corrupt(model, data.draw)
    before, logs = sorted(work.rglob("*")), _logs()
    result = CliRunner().invoke(app, ["init", "--source-model", str(model), "--target-tokenizer",
                                      str(sharded.parent / "single"), "--method", "fvt", "--out",
                                      str(work / "out")], catch_exceptions=False)
    output = " ".join(result.output.split())
    assert result.exit_code == 2, output
    assert output.count("error:") == 1 and "Traceback" not in output, output
    assert "--source-model" in output and named in output, (named, output)
    assert not (work / "out").exists() and sorted(work.rglob("*")) == before
    assert _logs() == logs  # a refusal, not an internal error


@SETTINGS
@given(data=st.data(), corrupt=st.sampled_from(CORRUPTIONS))
def test_adapt_preflight_refuses_a_damaged_source_model(data, corrupt, sharded, fixture_corpora, tmp_path_factory):
    """The same check runs in ``adapt``'s preflight (``vocadapt config --check-files``), before stage 1."""
    from tests.pipelines.tiny_world import tiny_config_overrides
    from vocadapt.components.errors import UserError
    from vocadapt.pipelines.preflight import preflight
    from vocadapt.platform.config import load_config

    work = tmp_path_factory.mktemp("adapt-case")
    model = work / "model"
    shutil.copytree(sharded, model)
    named = corrupt(model, data.draw)
    corpora = {key: Path(path) for key, path in fixture_corpora.items()}
    config = load_config(None, tiny_config_overrides(model, corpora, work, **{"init.methods": "[fvt]"}))
    with pytest.raises(UserError) as refused:
        preflight(config, check_files=True, console=None)
    assert "source.model" in str(refused.value) and named in str(refused.value)
    assert not (work / "runs").exists()


def test_a_tokenizer_damaged_after_a_clean_check_is_refused(sharded, tmp_path):
    """The model-folder check keeps a tokenizer's ids per process (parsing a large tokenizer.json takes seconds):
    the same folder damaged in place, same size, after a clean check is still refused."""
    import json

    from vocadapt.components.errors import UserError
    from vocadapt.platform.model_loading import check_model_folder

    model = tmp_path / "model"
    shutil.copytree(sharded, model)
    check_model_folder(model, what="--source-model")
    path = model / "tokenizer.json"
    size, tree = path.stat().st_size, json.loads(path.read_text(encoding="utf-8"))
    vocab = tree["model"]["vocab"]
    first, second = sorted(vocab, key=vocab.get)[-2:]  # two ids of the same width: the file keeps its size
    vocab[second] = vocab[first]
    text = json.dumps(tree, ensure_ascii=False)
    path.write_text(text + " " * (size - len(text.encode())), encoding="utf-8")
    assert path.stat().st_size == size
    with pytest.raises(UserError, match="share id"):
        check_model_folder(model, what="--source-model")
