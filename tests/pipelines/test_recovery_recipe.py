"""The GPU recovery recipe (configs/italian-smollm2-gpu.yaml) runs end to end on the CPU at toy size: the shipped
file's own choices (expansion by top-k, Align, distill, the side-by-side benchmark) on the tiny world, with only
the sizes and the GPU-only switches overridden. What it proves on a GPU is in BENCHMARKS.md ("Recovery")."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tests.pipelines.tiny_world import build_source_model, tiny_config_overrides
from vocadapt.cli.app import app

pytestmark = pytest.mark.timeout(900)
RECIPE = Path(__file__).resolve().parents[2] / "configs" / "italian-smollm2-gpu.yaml"
# sizes and GPU switches only: the recipe's mode, method, objective and benchmark stay as shipped
CPU_SMOKE = {"lapt.use_gpu": "false", "lapt.deepspeed.enabled": "false", "lapt.compile": "false",
             "lapt.max_tokens": "null", "lapt.max_steps": "2", "lapt.batch_size": "2", "lapt.sequence_length": "32",
             "lapt.warmup_steps": "0", "lapt.eval_every": "0", "lapt.eval_max_length": "64",
             "lapt.checkpoint_every": "0", "lapt.cpus_per_worker": "1", "tokenizer.expand_top_k": "40",
             "evaluation.max_documents": "16", "evaluation.max_length": "64", "evaluation.batch_size": "8",
             "evaluation.side_by_side_items": "6", "evaluation.max_new_tokens": "8", "lapt.head_fit_tokens": "512"}


def test_gpu_recipe_runs_on_the_cpu_at_toy_size(tmp_path, fixture_corpora, monkeypatch):
    recipe = yaml.safe_load(RECIPE.read_text())
    assert (recipe["init"]["mode"], recipe["init"]["methods"], recipe["lapt"]["objective"]) == \
        ("expand", ["align"], "distill")
    assert recipe["lapt"]["max_tokens"] >= 20_000_000  # the budget: at least 20M training tokens
    corpora = {key: Path(path) for key, path in fixture_corpora.items()}
    model = build_source_model(tmp_path / "source", [corpora["en.train"], corpora["it.train"]])
    world = tiny_config_overrides(model, corpora, tmp_path, **{"tracking.energy": "false"})
    world = [item for item in world if not item.startswith(("init.methods=", "tokenizer.vocab_size="))]
    overrides = [*world, *(f"{key}={value}" for key, value in CPU_SMOKE.items()), "tokenizer.vocab_size=700"]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    summary = tmp_path / "summary.json"
    result = CliRunner().invoke(app, ["adapt", str(RECIPE), *[a for o in overrides for a in ("--set", o)],
                                      "--json", str(summary)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(summary.read_text())
    assert report["best_method"] == "align"

    import mlflow

    client = mlflow.tracking.MlflowClient(os.environ["MLFLOW_TRACKING_URI"])
    runs = client.search_runs([client.get_experiment_by_name("tiny-e2e").experiment_id])
    child = next(run for run in runs if run.data.params.get("method") == "align")
    assert child.data.params.get("lapt.objective", "distill") == "distill"
    assert client.get_metric_history(child.info.run_id, "lapt_distill_loss")  # the distillation term trained
    assert recipe["lapt"]["head_fit_after"] is True  # then the new head rows were fitted, once
    fitted = client.get_metric_history(child.info.run_id, "lapt_head_fit_loss_after")
    assert 3 in {point.step for point in fitted}  # one step past LAPT's two (an entry at step 0 is logged too)
    fit = {name: value for name, value in child.data.metrics.items() if name.startswith("lapt_head_fit_")}
    # the fit really fitted: rows of the expansion, positions whose target is a new token, updates taken, and the
    # rows it kept no worse held out than the rows it was given
    assert fit["lapt_head_fit_rows"] > 0 and fit["lapt_head_fit_new_targets"] > 0, fit
    assert fit["lapt_head_fit_updates"] >= 1 and fit["lapt_head_fit_positions"] > 0, fit
    assert fit["lapt_head_fit_loss_after"] < fit["lapt_head_fit_loss_before"], fit
    if "lapt_head_fit_validation_loss_after" in fit:
        assert fit["lapt_head_fit_validation_loss_after"] <= fit["lapt_head_fit_validation_loss_before"], fit
    for key in ("benchmark.side_by_side_cloze_it.acc_bytes", "generation.tokens_per_character",
                "generation.percent_generated_new"):
        assert key in child.data.metrics, key
    assert "candidate" in result.output and "default gate" in result.output  # the gate preview was printed
