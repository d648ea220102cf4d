"""The GPU proof's code path on the CPU at toy size: ``benchmarks/recovery_gpu.py --device cpu --tiny`` runs the
product's ``run_adapt`` on the shipped GPU recipe (its mode, method, objective and head fit as shipped; the tiny world
and toy sizes only), and every score it reports is the one the product logged to MLflow. Without CUDA, ``--device
cuda`` is refused before any work."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import yaml

from tests.pipelines.plot_checks import assert_plot
from tests.pipelines.tiny_world import build_source_model, out_of_domain_overrides, tiny_config_overrides

pytestmark = pytest.mark.timeout(600)
ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "configs" / "italian-smollm2-gpu.yaml"


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
                              "--generation-tokens", "4", "--generation-repeats", "1", "--reference-characters",
                              "120", *sets])
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
    assert {"lapt.use_gpu=false", "lapt.deepspeed.enabled=false", "lapt.compile=false"} <= set(results["overrides"])
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
    assert results["head_fit"]["loss_after"] < results["head_fit"]["loss_before"]
    assert client.get_metric_history(results["mlflow"]["run_id"], "lapt_head_fit_loss_after")
    # the GPU machine's own measures ran on the CPU path too, and the goals read them
    assert results["generation_speed"]["1"]["adapted"]["new_tokens"] == 4
    assert results["equal_content"]["adapted"]["token_ratio"] > 0
    assert results["fertility_ratio"] > 1  # the expanded tokenizer needs fewer tokens per Italian character
    assert any(name.startswith("characters/s speed-up") for name in results["goals"])


def test_the_cpu_run_plots(cpu_run):
    out, _ = cpu_run
    path = _load("plot_recovery_gpu").plot(out)
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
