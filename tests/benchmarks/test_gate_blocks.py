"""benchmarks/gate_blocks.py: a gate's candidate - source difference on consecutive blocks of its items, ratio
metrics pooled over each block as the gate pools them, from the parts an adapt logs."""

from __future__ import annotations

import json

import pytest

from tests.benchmarks.loading import load_benchmark
from vocadapt.components.evaluation.bootstrap import parts_from_json


def _items(key: str, parts: list, kind: str = "ratio") -> dict:
    return {"format": 1, "items": {key: {"kind": kind, "parts": parts, "ids": [f"doc{i}" for i in range(len(parts))]}}}


def test_blocks_pool_bits_over_bytes_and_the_whole_sample_is_the_last_row(tmp_path, capsys, monkeypatch):
    blocks = load_benchmark("gate_blocks")
    source = [[200.0, 100.0], [100.0, 100.0], [300.0, 100.0], [300.0, 300.0]]
    candidate = [[190.0, 100.0], [100.0, 100.0], [330.0, 100.0], [300.0, 300.0]]
    rows = blocks.block_differences(parts_from_json(_items("x", source)["items"]["x"]),
                                    parts_from_json(_items("x", candidate)["items"]["x"]), 2)
    assert [(first, count, reference) for first, count, reference, _ in rows] == [(0, 2, 1.5), (2, 2, 1.5)]
    assert [difference.estimate for *_, difference in rows] == pytest.approx([-0.05, 0.075])  # 290/200 - 300/200 ...
    assert all(difference.low <= difference.estimate <= difference.high for *_, difference in rows)

    (tmp_path / "s.json").write_text(json.dumps(_items("source_model.bpb_ood_target", source)))
    (tmp_path / "c.json").write_text(json.dumps(_items("bpb_ood_target", candidate)))
    monkeypatch.setattr("sys.argv", ["gate_blocks", str(tmp_path / "s.json"), str(tmp_path / "c.json"), "--block", "2"])
    blocks.main()
    printed = capsys.readouterr().out
    assert "| 1-2 | 1.5000 | -0.0500 [" in printed and "| 3-4 | 1.5000 | +0.0750 [" in printed
    assert "| all 4 | 1.5000 | +0.0333 [" in printed  # 920/600 - 900/600 pooled; the blocks' mean is +0.0125


def test_a_saving_is_one_minus_the_pooled_ratio():
    blocks = load_benchmark("gate_blocks")
    source = parts_from_json(_items("x", [[90.0, 100.0], [80.0, 100.0]], kind="saving")["items"]["x"])
    candidate = parts_from_json(_items("x", [[80.0, 100.0], [60.0, 100.0]], kind="saving")["items"]["x"])
    (_, _, reference, difference), = blocks.block_differences(source, candidate, 2)
    assert reference == pytest.approx(0.15) and difference.estimate == pytest.approx(0.15)  # 1 - 140/200 - 0.15


def test_items_of_different_runs_are_refused():
    blocks = load_benchmark("gate_blocks")
    source = _items("x", [[1.0, 1.0]])["items"]["x"]
    other = dict(source, ids=["another"])
    with pytest.raises(ValueError, match="different items"):
        blocks.block_differences(parts_from_json(source), parts_from_json(other), 1)
