"""LAPT on Ray Train with two CPU workers reports its energy and CO2: measured in the workers (one meter per node),
summed over nodes, returned with the trained model; nothing written in the working folder. Two worker-group starts
(about a minute on two busy cores)."""

from __future__ import annotations

import pytest

from tests.training.lapt_tiny_world import ENGLISH, ITALIAN, make_model, make_tokenizer

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    import ray

    from vocadapt.platform.ray_train import init_ray

    root = tmp_path_factory.mktemp("lapt-energy-world")
    tokenizer = make_tokenizer()
    make_model(len(tokenizer)).save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    (root / "it.txt").write_text("\n".join(ITALIAN * 4), encoding="utf-8")
    (root / "en.txt").write_text("\n".join(ENGLISH * 4), encoding="utf-8")
    init_ray(num_cpus=2)
    yield root
    ray.shutdown()


def _run(world, name: str, **kwargs):
    from vocadapt.platform.ray_train import run_lapt_on_ray

    settings = dict(max_steps=2, batch_size=2, sequence_length=16, learning_rate=1e-2, warmup_steps=0,
                    num_workers=2, checkpoint_every=2, log_every=1, eval_every=2)
    return run_lapt_on_ray(world / "model", world / "model", settings, target_files=[world / "it.txt"],
                           source_files=[world / "en.txt"], eval_documents={"target": ITALIAN[:2]},
                           output_dir=world / name, run_name=name, storage_path=world / "ray", **kwargs)


def test_ray_lapt_reports_energy_summed_over_nodes(world, tmp_path, monkeypatch):
    from codecarbon.input import DataSource

    monkeypatch.chdir(tmp_path)
    result = _run(world, "measured", energy_country="FRA")
    energy = result.energy
    assert energy["stage"] == "lapt" and energy["country_iso_code"] == "FRA"
    assert energy["kwh"] > 0 and energy["kg_co2eq"] > 0
    grid = DataSource().get_global_energy_mix_data()["FRA"]["carbon_intensity"]
    assert energy["kg_co2eq"] * 1000 / energy["kwh"] == pytest.approx(grid, rel=1e-6)
    # two workers on one node: local rank 0 measured the machine once, the other worker added nothing
    assert energy["mode"].endswith("meters summed: 1") and "cpu:" in energy["mode"]
    assert energy["seconds"] > 0
    assert not list(tmp_path.iterdir()), "something was written in the working folder"
    # the same run name again: the finished run is found, and the energy it took comes back with it
    assert _run(world, "measured", energy_country="FRA").energy == energy
