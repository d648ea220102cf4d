"""The five-initialiser config (configs/italian-smollm2.yaml) on the real embedded default, at reduced size: few
evaluation lines, two LAPT steps."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.pipelines.demo_runs import adapt_with_overrides, italian_tokens_per_word

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def test_demo_config_at_reduced_size(embedded_assets, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    overrides = {
        "output_dir": str(tmp_path / "runs"),
        "evaluation.max_documents": 6,
        "evaluation.max_length": 64,
        "evaluation.side_by_side_items": 4,  # 24 items x 48 tokens for six models were most of this test's time
        "evaluation.max_new_tokens": 8,
        "lapt.max_steps": 2,
        "lapt.batch_size": 2,
        "lapt.sequence_length": 32,
        "tokenizer.max_training_lines": 20000,
    }
    _, report = adapt_with_overrides(ROOT / "configs" / "italian-smollm2.yaml", overrides, tmp_path / "summary.json")

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
