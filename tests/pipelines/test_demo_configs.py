"""The shipped configs run on the real embedded default, at minimal size: `make demo`'s config
(configs/italian-smollm2-expand.yaml: expansion by top-k with the English word list protected, fvt, LAPT, then the
new head rows fitted) and the five-initialiser config (configs/italian-smollm2.yaml). Each keeps its own choices;
only the sizes are overridden (few evaluation lines and out-of-domain paragraphs, two LAPT steps, a short
equal-content decode, a sampled expectation suite). What they reach at full size is in README.md and BENCHMARKS.md.
The suite's one end-to-end run of the demo (DEVELOPERS.md, "Tests")."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from vocadapt.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "configs" / "italian-smollm2-expand.yaml"
FIVE_METHODS = ROOT / "configs" / "italian-smollm2.yaml"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
# The sizes both configs run at here. Most of a run's time at the configs' own sizes is the 135M model's forward
# passes: 200 out-of-domain paragraphs per language and a 400-character token-by-token decode (three times) for the
# source and every method, besides the held-out documents and the side-by-side items (py-spy, five-initialiser
# config at these sizes with 4 items: the cloze, translation and generation of the side-by-side benchmark were 41% of
# the pipeline's own time in the test process, LAPT on Ray most of the rest; 2 items give every metric the tests read).
MINIMAL = {"evaluation.max_documents": "4", "evaluation.max_length": "64", "evaluation.side_by_side_items": "2",
           "evaluation.max_new_tokens": "8", "evaluation.out_of_domain_documents": "4",
           "evaluation.equal_content_characters": "20", "evaluation.equal_content_repeats": "1",
           "corpus.expectation_lines": "2000", "lapt.max_steps": "2", "lapt.batch_size": "2",
           "lapt.sequence_length": "32", "tokenizer.max_training_lines": "20000"}


def adapt_with_overrides(config: Path, overrides: dict[str, object], summary: Path):
    """`vocadapt adapt CONFIG --json SUMMARY --set key=value ...`; (the CLI result, the summary report). Asserts exit 0."""
    args = ["adapt", str(config), "--json", str(summary)]
    for key, value in overrides.items():
        args += ["--set", f"{key}={value}"]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result, json.loads(summary.read_text())


def italian_tokens_per_word(report: dict) -> tuple[float, float]:
    """(source tokenizer, target tokenizer) Italian tokens per word of an adapt summary."""
    fertility = report["fertility"]
    return fertility["source_tokenizer.it"]["tokens_per_word"], fertility["target_tokenizer.it"]["tokens_per_word"]


def test_make_demo_runs_the_expand_config():
    assert "configs/italian-smollm2-expand.yaml" in (ROOT / "Makefile").read_text()


def test_demo_expand_config_at_minimal_size(embedded_assets, tmp_path, monkeypatch):
    recipe = yaml.safe_load(DEMO.read_text())
    assert (recipe["init"]["mode"], recipe["init"]["methods"]) == ("expand", ["fvt"])
    assert recipe["lapt"]["head_fit_after"] is True
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    overrides = {"output_dir": tmp_path / "runs", **MINIMAL, "lapt.head_fit_tokens": "256"}
    result, report = adapt_with_overrides(DEMO, overrides, tmp_path / "summary.json")

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

    # the registered candidate (the demo's own model: SmolLM2 expanded by top-k) to a GGUF by llama.cpp's converter;
    # where llama.cpp is installed the export has it tokenize probe text as the tokenizer does before keeping the file
    gguf = tmp_path / "demo-f16.gguf"
    exported = CliRunner().invoke(app, ["export", f"models:/{name}/{version}", "--format", "gguf", "--quant", "f16",
                                        "--out", str(gguf), "--tracking-uri", os.environ["MLFLOW_TRACKING_URI"]],
                                  catch_exceptions=False)
    assert exported.exit_code == 0, exported.output
    assert gguf.is_file()
    tags = client.get_model_version(name, str(version)).tags
    assert tags.get("vocadapt.gguf.f16.sha256"), tags  # logged with the version, what promote --require-gguf reads


# The five-initialiser config's test reads no side-by-side metric (the expand config's does), so it scores one
# item; its fastText helper trains on 2,000 corpus lines instead of all 54,657 (py-spy of this test with 2 items, 6
# held-out documents and a 40-character decode: the helper 16% of the pipeline's own time, the side-by-side
# benchmark 24%, held-out bits per byte 14%, the equal-content decode 9%, for the source and five methods).
# Its five LAPT fits run in the test's process (lapt.runner in_process): the expand config's run above is the
# suite's end-to-end run of LAPT on Ray Train inside `adapt`, and each fit's worker group took 46 to 119 s to start.
# No equal-content decode either (nothing here reads it; the expand config's run above decodes, and
# tests/pipelines/test_adapt_e2e.py checks its figures): token by token for the source and five methods, it was 12 s.
FIVE_METHODS_MINIMAL = MINIMAL | {"evaluation.side_by_side_items": "1", "init.helper": "fasttext:max_lines=2000",
                                  "lapt.runner": "in_process", "evaluation.equal_content_characters": "0"}


def test_five_initialiser_config_at_minimal_size(embedded_assets, tmp_path, monkeypatch):
    recipe = yaml.safe_load(FIVE_METHODS.read_text())
    assert recipe["init"]["helper"] == "fasttext"  # the override below only bounds its training text
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    _, report = adapt_with_overrides(FIVE_METHODS, {"output_dir": str(tmp_path / "runs"), **FIVE_METHODS_MINIMAL},
                                     tmp_path / "summary.json")

    before, after = italian_tokens_per_word(report)
    assert after <= 0.75 * before, (before, after)  # the demo's goal: at least 25% lower
    assert set(report["methods"]) == {"random", "fvt", "align", "focus", "sava"}
    for method, bpb in report["methods"].items():
        assert {"target_zero_shot", "source_zero_shot", "target_after_lapt", "source_after_lapt"} <= set(bpb), method
    # FVT starts far closer to the source model than random rows do (SAVA §5; "0.01GB" Table 2)
    assert report["methods"]["fvt"]["target_zero_shot"] < report["methods"]["random"]["target_zero_shot"]
    name, version = report["registered"]
    assert name == "vocadapt-it-smollm2-135m" and version >= 1
    assert Path(report["output_dir"], report["best_method"]).is_dir()
