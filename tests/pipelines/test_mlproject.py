"""`mlflow run` drives every entry point of MLproject (`main`, `adapt`, `lapt`, `evaluate`, `sweep`) as a user runs
them (`mlflow run . -e <entry> --env-manager local`), each at tiny size on a model and tokenizer built here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.mlflow_store_seed import seed_file
from tests.pipelines.tiny_world import build_source_model, tiny_config_overrides

ROOT = Path(__file__).resolve().parents[2]
ENTRY_POINTS = ("main", "adapt", "lapt", "evaluate", "sweep")


def test_mlproject_entry_points_name_real_commands():
    from typer.testing import CliRunner

    from vocadapt.cli.app import app

    project = yaml.safe_load((ROOT / "MLproject").read_text())
    assert set(ENTRY_POINTS) == set(project["entry_points"]), "a new entry point needs a run in this file"
    for name, entry in project["entry_points"].items():
        command = entry["command"]
        sub = command.split()[1] if command.startswith("vocadapt ") else command.split("mlproject ")[1].split()[0]
        result = CliRunner().invoke(app, [sub, "--help"])
        assert result.exit_code == 0, (name, result.output)


@pytest.fixture(scope="module")
def tiny_project(tmp_path_factory, fixture_corpora) -> dict[str, Path]:
    """A tiny model, the demo config shrunk to it (``config``), a one-trial sweep over that config (``sweep``), and
    a copy of the project whose ``configs/italian-smollm2.yaml`` is the tiny config (``project``): `main` takes no
    parameters, so it runs there, unchanged."""
    folder = tmp_path_factory.mktemp("mlproject")
    corpora = {key: Path(path) for key, path in fixture_corpora.items()}
    model = build_source_model(folder / "tiny", [corpora["en.train"]])
    from vocadapt.platform.config import apply_override, load_config

    tree = yaml.safe_load((ROOT / "configs" / "italian-smollm2.yaml").read_text(encoding="utf-8"))
    for assignment in tiny_config_overrides(model, corpora, folder, **{
            "init.methods": "[fvt]", "init.helper": "null", "lapt.cpus_per_worker": "1",
            "tracking.experiment": "mlproject-tiny"}):
        apply_override(tree, assignment)
    config = folder / "tiny.yaml"
    config.write_text(yaml.safe_dump(tree), encoding="utf-8")
    load_config(config)  # the tiny config is a valid experiment

    project = folder / "project"
    (project / "configs").mkdir(parents=True)
    shutil.copy(ROOT / "MLproject", project / "MLproject")
    shutil.copy(config, project / "configs" / "italian-smollm2.yaml")

    sweep = folder / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({
        "name": "mlproject-sweep", "base": str(config), "search_space": {"init.methods": {"grid": ["fvt"]}},
        "scheduler": {"kind": "fifo", "max_t": 2}, "budget": {"max_concurrent_trials": 1, "cpus_per_trial": 1},
        "storage_path": str(folder / "sweeps"), "registered_model": "mlproject-sweep-best",
    }), encoding="utf-8")
    return {"folder": folder, "model": model, "config": config, "project": project, "sweep": sweep}


def _parameters(entry: str, world: dict[str, Path]) -> dict[str, str]:
    """Each entry point's `-P` parameters at tiny size (`main` has none)."""
    if entry == "adapt":
        return {"config": str(world["config"]), "overrides": "name=tiny-adapt lapt.enabled=false"}
    if entry == "lapt":
        return {"config": str(world["config"]), "overrides": "lapt.max_steps=1"}
    if entry == "sweep":
        return {"config": str(world["sweep"])}
    if entry == "evaluate":  # held-out text from the embedded corpora (the entry point's default data)
        suite = ("cloze.items=4 translation.items=2 translation.max_new_tokens=4 harness.batch_size=4 "
                 "harness.max_length=128 harness.limit=2 generation.examples=2 generation.max_new_tokens=4 "
                 "generation.repeats=1 bits_per_byte.documents=4 bits_per_byte.max_length=64 "
                 "similarity.anchors_per_kind=4")
        return {"model": str(world["model"]), "overrides": suite}
    return {}


@pytest.mark.timeout(900)
@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_mlflow_run_executes_the_entry_point(entry, tiny_project, tmp_path, request):
    import mlflow

    if entry == "evaluate":
        request.getfixturevalue("embedded_assets")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    seed_file(tmp_path / "mlflow.db")  # a migrated empty store: `mlflow run` skips MLflow's migrations
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "MLFLOW_TRACKING_URI": uri}
    env.pop("RAY_ADDRESS", None)
    project = tiny_project["project"] if entry == "main" else ROOT
    parameters = [arg for key, value in _parameters(entry, tiny_project).items() for arg in ("-P", f"{key}={value}")]
    result = subprocess.run(
        [str(Path(sys.executable).with_name("mlflow")), "run", str(project), "-e", entry, "--env-manager", "local",
         "--experiment-name", f"mlproject-{entry}", *parameters],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=850,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    client = mlflow.tracking.MlflowClient(uri)
    # the project run `mlflow run` opens, and the pipeline's own runs, all finished
    runs = [run for experiment in client.search_experiments() for run in client.search_runs([experiment.experiment_id])]
    project_runs = [run for run in runs if run.data.tags.get("mlflow.project.entryPoint") == entry]
    assert len(project_runs) == 1 and project_runs[0].info.status == "FINISHED"
    pipeline_runs = [run for run in runs if run.info.run_id != project_runs[0].info.run_id]
    assert pipeline_runs and all(run.info.status == "FINISHED" for run in pipeline_runs), entry
    if entry in ("main", "adapt", "sweep"):
        assert any(run.data.params.get("method") == "fvt" for run in pipeline_runs), entry
