"""`make demo`'s config (configs/italian-smollm2-expand.yaml) on the real embedded default, at reduced size: its own
choices (expansion by top-k with the English word list protected, fvt, LAPT, then the new head rows fitted) with only
the sizes overridden. What it reaches at full size, against every default gate, is in README.md and BENCHMARKS.md."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from tests.pipelines.demo_runs import adapt_with_overrides, italian_tokens_per_word

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "configs" / "italian-smollm2-expand.yaml"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
REDUCED = {"evaluation.max_documents": "6", "evaluation.max_length": "64", "evaluation.side_by_side_items": "4",
           "evaluation.max_new_tokens": "8", "lapt.max_steps": "2", "lapt.batch_size": "2",
           "lapt.sequence_length": "32", "lapt.head_fit_tokens": "256", "tokenizer.max_training_lines": "20000"}


def test_make_demo_runs_the_expand_config():
    assert "configs/italian-smollm2-expand.yaml" in (ROOT / "Makefile").read_text()


def test_demo_expand_config_at_reduced_size(embedded_assets, tmp_path, monkeypatch):
    recipe = yaml.safe_load(DEMO.read_text())
    assert (recipe["init"]["mode"], recipe["init"]["methods"]) == ("expand", ["fvt"])
    assert recipe["lapt"]["head_fit_after"] is True
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    result, report = adapt_with_overrides(DEMO, {"output_dir": tmp_path / "runs", **REDUCED}, tmp_path / "summary.json")

    before, after = italian_tokens_per_word(report)
    fertility = report["fertility"]
    assert after <= 0.85 * before, (before, after)  # 5,000 new tokens: 21% fewer tokens per word at full size
    english = fertility["target_tokenizer.en"]["tokens_per_word"], fertility["source_tokenizer.en"]["tokens_per_word"]
    assert english[0] == english[1], english  # the expansion keeps English as SmolLM2 tokenizes it, exactly
    name, version = report["registered"]
    assert name == "vocadapt-it-smollm2-135m" and version >= 1

    import mlflow

    client = mlflow.tracking.MlflowClient(os.environ["MLFLOW_TRACKING_URI"])
    runs = client.search_runs([client.get_experiment_by_name(recipe["tracking"]["experiment"]).experiment_id])
    child = next(run for run in runs if run.data.params.get("method") == "fvt")
    fit = {key.removeprefix("lapt_head_fit_"): value for key, value in client.get_run(child.info.run_id).data.metrics
           .items() if key.startswith("lapt_head_fit_")}  # the new head rows were fitted, once, after LAPT's 2 steps
    fitted_at = {m.step for m in client.get_metric_history(child.info.run_id, "lapt_head_fit_loss_after")}
    assert max(fitted_at) == 3, fitted_at  # one step past LAPT's two (an entry at step 0 is logged too)
    assert fit["rows"] > 0 and fit["positions"] > 0 and fit["updates"] > 0, fit
    if "validation_loss_after" in fit:  # the rows kept are never worse held out than the rows the fit was given
        assert fit["validation_loss_after"] <= fit["validation_loss_before"], fit
    for key in ("benchmark.side_by_side_cloze_it.acc_bytes", "benchmark.side_by_side_translation_en_it.chrf",
                "generation.tokens_per_character", "generation.percent_generated_new",
                "generation.same_text_token_saving"):
        assert key in child.data.metrics, key
    assert "candidate" in result.output and "default gate" in result.output  # the gate preview was printed
