"""benchmarks/recovery_gpu.py's own pieces (its run through the product on the CPU is
tests/benchmarks/test_recovery_gpu_cpu.py): the goals read the recovery proof's thresholds, the curves of the
committed GPU runs (measured by the script before it ran `vocadapt adapt`) still plot, the static-cache generation
figures add up, and the weight check of the device payload tells equal tensors from different ones."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from tests.pipelines.plot_checks import assert_plot

from tests.pipelines.tiny_world import build_source_model

ROOT = Path(__file__).resolve().parents[2]
GPU_RUN = ROOT / "benchmarks" / "results" / "recovery-gpu"


def _load(name: str):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def recovery_gpu():
    return _load("recovery_gpu")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, fixture_corpora):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = build_source_model(tmp_path_factory.mktemp("tiny"), [fixture_corpora["it.train"],
                                                                  fixture_corpora["en.train"]])
    return AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)


def test_goals_read_the_issues_thresholds(recovery_gpu):
    source = {"bpb_held_out_it": 3.0, "bpb_held_out_en": 1.5, "chrf_en_it": 14.0}
    adapted = {"bpb_held_out_it": 2.9, "bpb_held_out_en": 1.6, "chrf_en_it": 12.6, "percent_generated_new_it": 29.0}
    speed = {"1": {"source": {"characters_per_second_speed_up": 1.0},
                   "adapted": {"characters_per_second_speed_up": 1.18}}}
    goals = recovery_gpu.goals({"source": source, "adapted_final": adapted, "fertility_ratio": 1.3,
                                "generation_speed": speed})
    met = {name.split(" ")[0] + (" batch" if "batch" in name else ""): goal["met"] for name, goal in goals.items()}
    assert met == {"Italian": True, "chrF": True, "%Gen": False, "English": False, "characters/s batch": True}
    assert recovery_gpu.goals({"source": source}) == {}  # nothing adapted, nothing judged


def test_the_committed_gpu_run_plots_and_reports(tmp_path, capsys):
    plotting = _load("plot_recovery_gpu")
    (tmp_path / "recovery-gpu.json").write_bytes((GPU_RUN / "recovery-gpu.json").read_bytes())
    path = plotting.plot(tmp_path)
    assert_plot(path, size=(16 * 90, int(4.5 * 90)), grid=(1, 3))  # loss, bits per byte and speed panels
    results = json.loads((GPU_RUN / "recovery-gpu.json").read_text())
    assert results["training"]["tokens"] == len(results["training"]["history"]) * 32 * 1024
    assert results["source"]["bpb_held_out_it"] > results["curve"][-1]["bpb_held_out_it"]  # what BENCHMARKS says


def test_static_cache_generation_figures_add_up(tiny):
    speed = _load("generation_speed")
    model, tokenizer = tiny
    row = speed.static_cache_generation(model, tokenizer, ["La capitale", "Il documento contiene"], batch_size=3,
                                        new_tokens=5, repeats=1)
    assert row["batch_size"] == 3 and row["new_tokens"] == 5
    assert row["tokens_per_second"] == pytest.approx(15 / row["seconds"])
    assert row["characters_per_second"] == pytest.approx(row["tokens_per_second"] * row["characters_per_token"])
    both = speed.side_by_side({"a": (model, tokenizer), "b": (model, tokenizer)}, ["Ciao"], batches=[1],
                              new_tokens=3, repeats=1, compiled=False)
    assert both["1"]["a"]["characters_per_second_speed_up"] == 1.0
    assert both["1"]["b"]["characters_per_token"] == both["1"]["a"]["characters_per_token"]  # same model, same text


def test_tensor_hashes_tell_equal_weights_from_different(tiny):
    payload = _load("device_payload")
    model, _ = tiny
    state = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    assert payload.tensor_hashes(state) == payload.tensor_hashes(model.state_dict())
    name = next(iter(state))
    state[name].view(-1)[0] += 1e-3
    differ = [k for k, v in payload.tensor_hashes(state).items() if v != payload.tensor_hashes(model.state_dict())[k]]
    assert differ == [name]
