"""benchmarks/recovery.py's own pieces: the arms of a sweep read back from MLflow as the product logged them (a
sweep run, a trial run per arm, its adapt run and method run), their names, the table and the curves (the sweep
itself is pipelines/sweep.py's, tested in tests/sweeps)."""

from __future__ import annotations

import json

import pytest

from tests.benchmarks.loading import load_benchmark
from tests.pipelines.plot_checks import assert_plot


@pytest.fixture(scope="module")
def recovery():
    return load_benchmark("recovery")


def _results():
    source = {"bpb_held_out_it": 3.08, "bpb_held_out_en": 1.42, "chrf_en_it": 15.4, "cloze_it_acc_bytes": 0.5,
              "bpb_ood_it": 2.65}
    arm = {"step0": {"bpb_held_out_it": 3.13, "bpb_held_out_en": 1.43},
           "final": {"bpb_held_out_it": 2.89, "bpb_held_out_en": 1.40, "chrf_en_it": 12.6, "bpb_ood_it": 2.79,
                     "percent_generated_new_it": 0.0},
           "curve": [[15, 2.94], [30, 2.89]]}
    return {"source": source, "arms": {"expand-distill": arm, "replace-clm": arm | {"curve": []}}}


def test_arm_names(recovery):
    assert recovery.arm_name({"init.mode": "expand", "lapt.objective": "clm+distill"}) == "expand-clm+distill"
    assert recovery.arm_name({"lapt.objective": "clm", "lapt.strategy": "new-head"}) == "expand-clm@new-head"
    assert recovery.arm_name({"init.mode": "replace", "lapt.objective": "mtp", "lapt.learning_rate": 0.01}) == \
        "replace-mtp lapt.learning_rate=0.01"


def test_table_has_the_source_and_every_arm_before_and_after(recovery):
    lines = recovery.table(_results()).splitlines()
    assert lines[0].startswith("| arm | when | it bpb |")
    assert lines[2].startswith("| source |  | 3.080 | 1.420 | 2.650 |")
    assert [line.split(" | ")[0:2] for line in lines[3:]] == [
        ["| expand-distill", "step 0"], ["| expand-distill", "after LAPT"], ["| replace-clm", "step 0"],
        ["| replace-clm", "after LAPT"]]


def test_curves_are_a_png(recovery, tmp_path):
    recovery.plot(_results(), tmp_path / "recovery.png")
    assert_plot(tmp_path / "recovery.png", size=(18 * 90, int(4.5 * 90)), grid=(1, 4), blank=frozenset({(0, 3)}))


def test_the_arms_are_read_back_as_the_product_logged_them(recovery, tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("recovery", artifact_location=str(tmp_path / "artifacts"))

    def run(parent=None, tags=None, metrics=None):
        tags = dict(tags or {}) | ({"mlflow.parentRunId": parent} if parent else {})
        run_id = client.create_run(experiment, tags=tags).info.run_id
        for key, value in (metrics or {}).items():
            for step, point in (value if isinstance(value, list) else [(0, value)]):
                client.log_metric(run_id, key, point, step=step)
        return run_id

    sweep = run()
    for mode, objective, target in (("expand", "distill", 2.9), ("replace", "clm", 2.2)):
        trial = run(sweep, {"vocadapt.sweep.params": json.dumps({"lapt.objective": objective})})
        adapt = run(trial, metrics={"source_model.bpb_target": 3.0, "source_model.bpb_source": 1.4,
                                    "source_model.bpb_ood_target": 2.6,
                                    "source_model.benchmark.side_by_side_translation_en_it.chrf": 15.0})
        client.log_param(adapt, "init.mode", mode)  # the adapt run's config, where the sweep does not vary it
        run(adapt, metrics={"bpb_target_zero_shot": 3.1, "bpb_source_zero_shot": 1.5, "bpb_target_after_lapt": target,
                            "bpb_source_after_lapt": 1.45, "benchmark.side_by_side_translation_en_it.chrf": 12.0,
                            "generation.percent_generated_new": 3.0, "bpb_ood_target": 2.7,
                            "lapt_bits_per_byte_target": [(30, target), (15, target + 0.1)]})
    results = recovery.collect(uri, sweep)
    assert results["source"] == {"bpb_held_out_it": 3.0, "bpb_held_out_en": 1.4, "bpb_ood_it": 2.6,
                                 "chrf_en_it": 15.0}
    assert sorted(results["arms"]) == ["expand-distill", "replace-clm"]
    arm = results["arms"]["replace-clm"]
    assert arm["step0"] == {"bpb_held_out_it": 3.1, "bpb_held_out_en": 1.5}
    assert arm["final"] == {"bpb_held_out_it": 2.2, "bpb_held_out_en": 1.45, "bpb_ood_it": 2.7, "chrf_en_it": 12.0,
                            "percent_generated_new_it": 3.0}
    assert arm["curve"] == [(15, pytest.approx(2.3)), (30, 2.2)]
