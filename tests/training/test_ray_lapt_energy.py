"""`vocadapt lapt` on Ray Train with two CPU workers records its energy and CO2: measured in the workers (one meter
per node), summed over nodes, returned with the trained model and logged on the run; nothing written in the working
folder. One worker-group start (under a minute on two busy cores)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.pipelines.tiny_world import build_source_model, tiny_config_overrides

pytestmark = pytest.mark.timeout(600)


def test_vocadapt_lapt_logs_the_workers_energy(tmp_path, fixture_corpora, monkeypatch):
    import ray
    from codecarbon.input import DataSource
    from mlflow.tracking import MlflowClient

    from vocadapt.cli.app import app
    from vocadapt.platform import ray_train

    corpora = {key: Path(path) for key, path in fixture_corpora.items()}
    model = build_source_model(tmp_path / "model", [corpora["en.train"]])
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    returned, collect = [], ray_train._collect

    def keep_result(*args):  # the LaptRunResult the command gets, to compare with what it logged
        returned.append(collect(*args))
        return returned[-1]

    monkeypatch.setattr(ray_train, "_collect", keep_result)
    overrides = tiny_config_overrides(model, corpora, tmp_path, **{
        "lapt.max_steps": "2", "lapt.batch_size": "2", "lapt.sequence_length": "16", "lapt.num_workers": "2",
        "lapt.eval_every": "2", "tracking.country_iso_code": "FRA", "evaluation.max_documents": "2"})
    try:
        result = CliRunner().invoke(app, ["lapt", "--model", str(model), *(a for o in overrides for a in ("--set", o))],
                                    catch_exceptions=False)
    finally:
        ray.shutdown()
    assert result.exit_code == 0, result.output

    energy = returned[-1].energy  # what the workers sent back with the model
    assert energy["stage"] == "lapt" and energy["country_iso_code"] == "FRA" and energy["kwh"] > 0
    # two workers on one node: local rank 0 measured the machine once, the other worker added nothing
    assert energy["mode"].endswith("meters summed: 1") and "cpu:" in energy["mode"]
    grid = DataSource().get_global_energy_mix_data()["FRA"]["carbon_intensity"]
    assert energy["kg_co2eq"] * 1000 / energy["kwh"] == pytest.approx(grid, rel=1e-6)

    client = MlflowClient(uri)
    (run,) = client.search_runs([client.get_experiment_by_name("tiny-e2e").experiment_id])
    metrics, tags = run.data.metrics, run.data.tags
    assert metrics["energy.lapt.kwh"] == pytest.approx(energy["kwh"]) == pytest.approx(metrics["energy.total.kwh"])
    assert metrics["emissions.lapt.kg_co2eq"] == pytest.approx(energy["kg_co2eq"])
    assert tags["vocadapt.energy_country"] == "FRA" and tags["vocadapt.energy_mode"] == energy["mode"]
    assert not list(work.iterdir()), "something was written in the working folder"
