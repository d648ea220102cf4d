"""benchmarks/gate_blocks.py: a gate's candidate - source difference on consecutive blocks of its items, ratio
metrics pooled over each block as the gate pools them, from the parts an adapt logs."""

from __future__ import annotations

import json

import pytest

from tests.benchmarks.loading import load_benchmark


def _items(key: str, parts: list, kind: str = "ratio") -> dict:
    return {"format": 1, "items": {key: {"kind": kind, "parts": parts, "ids": [f"doc{i}" for i in range(len(parts))]}}}


def test_blocks_pool_bits_over_bytes_and_the_whole_sample_is_the_last_row(tmp_path, capsys, monkeypatch):
    blocks = load_benchmark("gate_blocks")
    source = [[200.0, 100.0], [100.0, 100.0], [300.0, 100.0], [300.0, 300.0]]
    candidate = [[190.0, 100.0], [100.0, 100.0], [330.0, 100.0], [300.0, 300.0]]
    rows = blocks.block_differences(_items("x", source)["items"]["x"], _items("x", candidate)["items"]["x"], 2)
    assert rows == [(0, 2, 1.5, pytest.approx(-0.05)), (2, 2, 1.5, pytest.approx(0.075))]  # 290/200 - 300/200 ...

    (tmp_path / "s.json").write_text(json.dumps(_items("source_model.bpb_ood_target", source)))
    (tmp_path / "c.json").write_text(json.dumps(_items("bpb_ood_target", candidate)))
    monkeypatch.setattr("sys.argv", ["gate_blocks", str(tmp_path / "s.json"), str(tmp_path / "c.json"), "--block", "2"])
    blocks.main()
    printed = capsys.readouterr().out
    assert "| 1-2 | 1.5000 | -0.0500 |" in printed and "| 3-4 | 1.5000 | +0.0750 |" in printed
    assert "| all 4 | 1.5000 | +0.0333 |" in printed  # 920/600 - 900/600 pooled; the blocks' mean is +0.0125


def test_items_of_different_runs_are_refused():
    blocks = load_benchmark("gate_blocks")
    source = _items("x", [[1.0, 1.0]])["items"]["x"]
    other = dict(source, ids=["another"])
    with pytest.raises(SystemExit, match="different items"):
        blocks.block_differences(source, other, 1)
