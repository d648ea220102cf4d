"""The GPU proof's code path on the CPU at toy size: ``benchmarks/recovery_gpu.py --device cpu --tiny`` runs the
product's ``run_adapt`` on the shipped GPU recipe (its mode, method, objective and head fit as shipped; the tiny world
and toy sizes only), and every score it reports is the one the product logged to MLflow. Without CUDA, ``--device
cuda`` is refused before any work. And the script's own pieces: the goals read the recovery proof's thresholds, the
committed GPU runs (measured by the script before it ran the product) still plot, the static-cache generation
figures add up, and the weight check of the device payload tells equal tensors from different ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.benchmarks.loading import load_benchmark
from tests.pipelines.plot_checks import assert_plot
from tests.pipelines.tiny_world import build_source_model, out_of_domain_overrides, tiny_config_overrides

pytestmark = pytest.mark.timeout(600)
ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "configs" / "italian-smollm2-gpu.yaml"
GPU_RUN = ROOT / "benchmarks" / "results" / "recovery-gpu"


@pytest.fixture(scope="module")
def recovery_gpu():
    return load_benchmark("recovery_gpu")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, fixture_corpora):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = build_source_model(tmp_path_factory.mktemp("tiny"), [fixture_corpora["it.train"],
                                                                  fixture_corpora["en.train"]])
    return AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)


def _world(folder: Path, corpora: dict[str, Path]) -> list[str]:
    """The tiny world's overrides: its model and corpora, out-of-domain text, no registration or energy meter."""
    model = build_source_model(folder / "source", [corpora["en.train"], corpora["it.train"]])
    world = tiny_config_overrides(model, corpora, folder, **{"tracking.energy": "false",
                                                              "tracking.register_best": "false"},
                                  **out_of_domain_overrides(folder))
    # the recipe's method and the benchmark's toy vocabulary stay; the tiny world's budget is --tiny's
    return [item for item in world if not item.startswith(("init.methods=", "tokenizer.vocab_size=", "lapt."))]


@pytest.fixture(scope="module")
def cpu_run(recovery_gpu, tmp_path_factory, fixture_corpora):
    folder = tmp_path_factory.mktemp("recovery-gpu-cpu")
    corpora = {key: Path(path) for key, path in fixture_corpora.items()}
    sets = [arg for item in _world(folder, corpora) for arg in ("--set", item)]
    out = folder / "out"
    code = recovery_gpu.main(["--out", str(out), "--device", "cpu", "--tiny", "--generation-batches", "1",
                              "--generation-tokens", "4", "--generation-repeats", "1", *sets])
    assert code == 0
    return out, json.loads((out / "recovery-gpu.json").read_text(encoding="utf-8"))


def test_the_recipe_runs_through_the_product_on_the_cpu(cpu_run):
    import mlflow

    recipe = yaml.safe_load(RECIPE.read_text())
    assert (recipe["init"]["mode"], recipe["init"]["methods"], recipe["lapt"]["objective"]) == \
        ("expand", ["align"], "distill")
    assert recipe["lapt"]["head_fit_after"] is True and recipe["lapt"]["max_tokens"] >= 20_000_000
    assert recipe["lapt"]["deepspeed"] == {"enabled": True, "zero_stage": 1, "precision": "bf16"}
    out, results = cpu_run
    assert results["method"] == "align" and results["device"] == "cpu"
    assert {"lapt.use_gpu=false", "lapt.deepspeed.enabled=false", "lapt.compile=false",
            "evaluation.device=cpu"} <= set(results["overrides"])
    client = mlflow.tracking.MlflowClient(results["mlflow"]["tracking_uri"])
    child = client.get_run(results["mlflow"]["run_id"]).data
    parent = client.get_run(results["mlflow"]["parent_run_id"]).data
    assert child.params["method"] == "align" and parent.params["lapt.objective"] == "distill"
    # every reported score is the product's own, as logged
    final, source = results["adapted_final"], results["source"]
    assert final["cloze_it_acc_bytes"] == child.metrics["benchmark.side_by_side_cloze_it.acc_bytes"]
    assert final["generated_tokens_per_character_it"] == child.metrics["generation.tokens_per_character"]
    assert final["bpb_ood_it"] == child.metrics["bpb_ood_target"]
    assert final["bpb_held_out_it"] == child.metrics["bpb_target_after_lapt"]
    assert source["bpb_held_out_it"] == parent.metrics["source_model.bpb_target"]
    assert source["bpb_ood_en"] == parent.metrics["source_model.bpb_ood_source"]
    assert results["adapted_step0"]["bpb_held_out_it"] == child.metrics["bpb_target_zero_shot"]
    # LAPT distilled for --tiny's two steps, evaluated held-out text at each, then fitted the new head rows once
    # (logged as one more step, evaluated too)
    training = results["training"]
    assert training["steps"] == 3 and sum("distill_loss" in row for row in training["history"]) == 2
    assert [point["step"] for point in results["curve"]] == [1, 2, 3]
    fit = results["head_fit"]  # the fit really fitted: rows of the expansion, new-token targets, updates taken
    assert fit["rows"] > 0 and fit["new_targets"] > 0 and fit["updates"] >= 1 and fit["positions"] > 0, fit
    assert fit["loss_after"] < fit["loss_before"], fit
    assert client.get_metric_history(results["mlflow"]["run_id"], "lapt_head_fit_loss_after")
    # the GPU machine's own measures ran on the CPU path too, and the goals read them
    assert results["generation_speed"]["1"]["adapted"]["new_tokens"] == 4
    assert final["equal_content_token_ratio"] == child.metrics["generation.equal_content_token_ratio"]
    assert results["fertility_ratio"] > 1  # the expanded tokenizer needs fewer tokens per Italian character
    assert any(name.startswith("characters/s speed-up") for name in results["goals"])


def test_the_cpu_run_plots(cpu_run):
    out, _ = cpu_run
    path = load_benchmark("plot_recovery_gpu").plot(out)
    assert_plot(path, size=(16 * 90, int(4.5 * 90)), grid=(1, 3))


def test_cuda_is_refused_without_cuda_before_any_work(recovery_gpu, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the refusal is for machines without it")
    with pytest.raises(SystemExit, match="needs a CUDA device.*--device cpu"):
        recovery_gpu.main(["--out", str(tmp_path / "out"), "--no-generation-speed"])
    assert not (tmp_path / "out" / "runs").exists() and not (tmp_path / "out" / "mlflow.db").exists()


def test_the_token_budget_fits_the_time(recovery_gpu):
    assert recovery_gpu.steps_for(300, 80_000, 32 * 1024) == 732
    assert recovery_gpu.steps_for(1, 10, 32 * 1024) == 1
    with pytest.raises(SystemExit, match="go together"):
        recovery_gpu.main(["--out", "unused", "--train-seconds", "300"])


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
    plotting = load_benchmark("plot_recovery_gpu")
    (tmp_path / "recovery-gpu.json").write_bytes((GPU_RUN / "recovery-gpu.json").read_bytes())
    path = plotting.plot(tmp_path)
    assert_plot(path, size=(16 * 90, int(4.5 * 90)), grid=(1, 3))  # loss, bits per byte and speed panels
    results = json.loads((GPU_RUN / "recovery-gpu.json").read_text())
    assert results["training"]["tokens"] == len(results["training"]["history"]) * 32 * 1024
    assert results["source"]["bpb_held_out_it"] > results["curve"][-1]["bpb_held_out_it"]  # what BENCHMARKS says


def test_static_cache_generation_figures_add_up(tiny):
    speed = load_benchmark("generation_speed")
    model, tokenizer = tiny
    row = speed.static_cache_generation(model, tokenizer, ["La capitale", "Il documento contiene"],
                                        speed.DecodeRun(batch_size=3, new_tokens=5, repeats=1))
    assert row["batch_size"] == 3 and row["new_tokens"] == 5
    assert row["tokens_per_second"] == pytest.approx(15 / row["seconds"])
    assert row["characters_per_second"] == pytest.approx(row["tokens_per_second"] * row["characters_per_token"])
    both = speed.side_by_side({"a": (model, tokenizer), "b": (model, tokenizer)}, ["Ciao"], batches=[1],
                              new_tokens=3, repeats=1, compiled=False)
    assert both["1"]["a"]["characters_per_second_speed_up"] == 1.0
    assert both["1"]["b"]["characters_per_token"] == both["1"]["a"]["characters_per_token"]  # same model, same text


def test_tensor_hashes_tell_equal_weights_from_different(tiny):
    payload = load_benchmark("device_payload")
    model, _ = tiny
    state = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    assert payload.tensor_hashes(state) == payload.tensor_hashes(model.state_dict())
    name = next(iter(state))
    state[name].view(-1)[0] += 1e-3
    differ = [k for k, v in payload.tensor_hashes(state).items() if v != payload.tensor_hashes(model.state_dict())[k]]
    assert differ == [name]
