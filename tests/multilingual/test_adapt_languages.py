"""`adapt` with several target languages (Italian and Hindi: Latin and Devanagari) on a tiny model built here:
the expansion's budget split across them, fertility and bits per byte per language, the LAPT streams and mixing.

LAPT is a stand-in (the real one through Ray Train is tests/pipelines/test_adapt_e2e.py's); what it is handed is
checked, and plan_lapt (which checks every stream's files before Ray starts) is run on the same request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.pipelines.tiny_world import build_source_model, tiny_config_overrides

pytestmark = pytest.mark.timeout(600)


def _overrides(tmp_path: Path, corpora: dict[str, Path], source: Path, **extra: str) -> list[str]:
    overrides = [o for o in tiny_config_overrides(source, corpora, tmp_path) if not o.startswith("target.language=")]
    return overrides + [f"{key}={value}" for key, value in {
        "target.languages": "[it, hi]",
        "corpus.languages.hi.train": f"[{corpora['hi.train']}]",
        "corpus.languages.hi.validation": f"[{corpora['hi.validation']}]",
        "init.methods": "[fvt]", "tokenizer.protect_lexicon": "null", "evaluation.side_by_side_items": "0",
        "tracking.tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}", "tracking.energy": "false",
        "tracking.register_best": "false", **extra,
    }.items()]


@pytest.fixture
def world(tmp_path, fixture_corpora):
    corpora = {key: Path(path) for key, path in fixture_corpora.items()}
    return corpora, build_source_model(tmp_path / "source", [corpora["en.train"]])


def test_adapt_expands_for_two_languages_and_reports_each(tmp_path, world, monkeypatch):
    from rich.console import Console

    from vocadapt.pipelines.adapt import run_adapt
    from vocadapt.pipelines.lapt import LaptRequest
    from vocadapt.pipelines.vocabulary_steps import held_out_bits_per_byte
    from vocadapt.platform.config import load_config
    from vocadapt.platform.lapt.ray_train import LaptInputs, LaptPlacement, plan_lapt
    from vocadapt.platform.tracking import Tracker

    corpora, source = world
    config = load_config(None, _overrides(tmp_path, corpora, source, **{
        "init.mode": "expand", "tokenizer.expand_top_k": "120", "tokenizer.budget_rule": "gain"}))
    assert config.lapt.mixing == {"target": 0.375, "target_hi": 0.375, "source": 0.25}
    handed = {}

    def stand_in(recipe, model_dir, workdir, run_id):
        config, inputs, held_out = recipe.config, recipe.inputs, recipe.held_out
        request = LaptRequest(config, inputs, Path(model_dir), "tiny-lapt", Path(workdir), held_out)
        from vocadapt.pipelines.vocabulary_steps import lapt_language_files

        plan = plan_lapt(model_dir, model_dir, config.lapt.model_copy(
            update={"train_files": lapt_language_files(config, inputs)}), LaptInputs([], eval_documents=held_out),
            placement=LaptPlacement(workdir, "tiny-lapt"))  # fmt: skip
        handed.update(request=request, plan=plan)
        from vocadapt.platform.model_loading import load_model

        model, tokenizer = load_model(Path(model_dir), what="initialised model")
        out = Path(workdir) / "lapt" / "model"  # adapt deletes the initialised folder after LAPT
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
        return {"model_dir": out, "steps": 2, "energy": None,
                "bits_per_byte": held_out_bits_per_byte(model, tokenizer, held_out, config)}

    monkeypatch.setattr("vocadapt.pipelines.adapt.continue_pretraining", stand_in)
    result = run_adapt(config, Console(quiet=True))

    plan = handed["plan"].loop_config
    assert set(plan["train_files"]) == {"target", "target_hi", "source"}
    assert plan["train_files"]["target_hi"] == [str(corpora["hi.train"])]
    assert plan["train_files"]["target"] == [str(corpora["it.train"])]
    assert set(plan["eval_documents"]) == {"target", "target_hi", "source"}
    for language in ("it", "hi", "en"):
        before = result.fertility[f"source_tokenizer.{language}"]["tokens_per_character"]
        after = result.fertility[f"target_tokenizer.{language}"]["tokens_per_character"]
        assert (after < before) if language != "en" else (after == before), language
    assert set(result.source_bits_per_byte) == {"target", "target_hi", "source"}
    outcome = result.best
    assert {"target_hi_zero_shot", "target_hi_after_lapt", "target_after_lapt"} <= set(outcome.bits_per_byte)
    assert outcome.held_out_target_bpb() == pytest.approx((outcome.bits_per_byte["target_after_lapt"]
                                             + outcome.bits_per_byte["target_hi_after_lapt"]) / 2)
    tracker = Tracker(result.tracking_uri, config.tracking.experiment)
    metrics = tracker.client.get_run(result.parent_run_id).data.metrics
    assert "fertility.target_tokenizer.hi.tokens_per_character" in metrics
    assert "source_model.bpb_target_hi" in metrics
    child = tracker.client.get_run(outcome.run_id).data.metrics
    assert "bpb_target_hi_zero_shot" in child and "bpb_target_hi_after_lapt" in child
    # the equal-content decode on each language's own held-out text, Hindi's fewer tokens included
    for scope in ("", "hi."):
        assert child[f"generation.{scope}equal_content_speed_up"] > 0
        assert child[f"generation.{scope}equal_content_token_ratio"] > 1, scope
    expansion = json.loads(Path(tracker.client.download_artifacts(result.parent_run_id, "expansion.json",
                                                                  str(tmp_path))).read_text())
    budget = expansion["budget"]
    assert budget["rule"] == "gain" and set(budget["planned"]) == {"it", "hi"}
    assert budget["added"]["it"] > 0 and budget["added"]["hi"] > 0


def test_replacement_trains_one_tokenizer_on_the_balanced_mix(tmp_path, world):
    from transformers import AutoTokenizer

    from vocadapt.pipelines.vocabulary_steps import train_target_tokenizer
    from vocadapt.platform.config import load_config
    from vocadapt.platform.assets.sources import resolve_inputs

    corpora, source = world
    config = load_config(None, _overrides(tmp_path, corpora, source, **{"init.mode": "replace",
                                                                        "tokenizer.vocab_size": "700"}))
    inputs = resolve_inputs(config)
    english = AutoTokenizer.from_pretrained(source)
    tokenizer, change, folder = train_target_tokenizer(config, inputs, english, tmp_path / "work")
    assert folder.is_dir() and len(tokenizer) == len(change.tokenizer) <= 700
    for language in ("it", "hi"):  # both languages' words became tokens of the one vocabulary
        text = corpora[f"{language}.validation"].read_text(encoding="utf-8").splitlines()[:20]
        tokens = sum(map(len, tokenizer(text, add_special_tokens=False)["input_ids"]))
        source_tokens = sum(map(len, english(text, add_special_tokens=False)["input_ids"]))
        assert tokens < 0.8 * source_tokens, (language, tokens, source_tokens)
