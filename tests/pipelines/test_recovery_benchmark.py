"""benchmarks/recovery.py's own pieces: arm names, the table and the curves (the run itself is a benchmark)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.pipelines.plot_checks import assert_plot

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def recovery():
    spec = importlib.util.spec_from_file_location("recovery_benchmark", ROOT / "benchmarks" / "recovery.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _results():
    source = {"bpb_held_out_it": 3.08, "bpb_held_out_en": 1.42, "chrf_en_it": 15.4, "cloze_it_acc_bytes": 0.5}
    curve = [(0, {"bpb_held_out_it": 3.13, "chrf_en_it": 12.1, "percent_generated_new_it": 0.0}),
             (15, {"bpb_held_out_it": 2.40, "chrf_en_it": 6.6, "percent_generated_new_it": 0.0, "chat": "Ciao"})]
    return {"source": source, "arms": {"expand-clm": curve, "expand-clm@new-head": curve[:1]}}


def test_arm_names(recovery):
    assert recovery.arm("expand-clm+distill") == recovery.Arm("expand-clm+distill", "expand", "clm+distill", "full")
    assert recovery.arm("expand-clm@new-head").strategy == "new-head"
    assert recovery.arm("0.01gb") == recovery.Arm("0.01gb", "expand", "mtp", "2x2-ls")
    assert set(recovery.ARMS) >= {"replace-clm", "replace-distill", "expand-clm+distill", "0.01gb"}
    with pytest.raises(SystemExit, match="unknown arm 'shrink-clm'"):
        recovery.arm("shrink-clm")
    with pytest.raises(SystemExit, match="unknown arm"):
        recovery.arm("expand-sgd")


def test_table_has_the_source_and_every_scored_step(recovery):
    lines = recovery.table(_results()).splitlines()
    assert lines[0].startswith("| arm | step | it bpb |")
    assert lines[2].startswith("| source |  | 3.080 | 1.420 |")
    assert [line.split(" | ")[0:2] for line in lines[3:]] == [
        ["| expand-clm", "0"], ["| expand-clm", "15"], ["| expand-clm@new-head", "0"]]


def test_curves_are_a_png(recovery, tmp_path):
    recovery.plot(_results(), tmp_path / "recovery.png")
    # benchmarks/recovery.py's figure: the arms' curves where they have the panel's measure; out-of-domain bpb, English
    # bpb and cloze have none here (English and cloze show only the source's black reference line)
    assert_plot(tmp_path / "recovery.png", size=(15 * 90, 8 * 90), grid=(2, 3), blank=frozenset({(0, 1), (0, 2),
                                                                                                  (1, 1)}))
