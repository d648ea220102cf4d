"""The cluster specs in infra/ parse, and what they run is a real vocadapt command with a valid config."""

import shlex
from pathlib import Path

import pytest
import yaml

from vocadapt.cli.app import app
from vocadapt.platform.config import load_config

ROOT = Path(__file__).resolve().parents[2]


def _check_vocadapt_command(command: str) -> None:
    words = shlex.split(command)
    assert words[0] == "vocadapt"
    registered = {c.name for c in app.registered_commands}
    assert words[1] in registered, f"{words[1]} is not a vocadapt command"
    config_file = ROOT / words[2]
    assert config_file.is_file()
    overrides = [words[i + 1] for i, word in enumerate(words) if word == "--set"]
    load_config(config_file, overrides)  # the overrides name real fields with valid values


def test_kuberay_rayjob_runs_lapt_with_shared_checkpoints():
    spec = yaml.safe_load((ROOT / "infra" / "kuberay-rayjob.yaml").read_text())
    assert spec["apiVersion"] == "ray.io/v1" and spec["kind"] == "RayJob"
    _check_vocadapt_command(spec["spec"]["entrypoint"])
    assert "lapt" == shlex.split(spec["spec"]["entrypoint"])[1]
    storage = next(w.split("=", 1)[1] for w in shlex.split(spec["spec"]["entrypoint"]) if "storage_path" in w)
    for group in [spec["spec"]["rayClusterSpec"]["headGroupSpec"], *spec["spec"]["rayClusterSpec"]["workerGroupSpecs"]]:
        mounts = group["template"]["spec"]["containers"][0]["volumeMounts"]
        assert any(storage.startswith(m["mountPath"]) for m in mounts)
    workers = spec["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    gpus = int(workers["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
    num_workers = int(next(w.split("=")[1] for w in shlex.split(spec["spec"]["entrypoint"]) if "num_workers" in w))
    assert num_workers == gpus * workers["replicas"]  # one Ray Train worker per GPU
    yaml.safe_load(spec["spec"]["runtimeEnvYAML"])


def test_ray_cluster_launcher_yaml_installs_vocadapt_and_starts_ray():
    spec = yaml.safe_load((ROOT / "infra" / "ray-cluster.yaml").read_text())
    assert spec["head_node_type"] in spec["available_node_types"]
    assert any("pip install" in c and "-e ." in c for c in spec["setup_commands"])
    assert any("ray start --head" in c for c in spec["head_start_ray_commands"])
    assert any("ray start --address" in c for c in spec["worker_start_ray_commands"])


def test_submit_builds_a_job_with_working_dir_and_pinned_requirements():
    from vocadapt.cli.commands.submit import job_spec, pinned_requirements
    from vocadapt.components.errors import UserError

    pins = pinned_requirements(ROOT / "pyproject.toml")
    assert "ray[default,train,tune]==2.60.0" in pins
    spec = job_spec(["lapt", "configs/italian-smollm2.yaml", "--set", "lapt.max_steps=5"], working_dir=ROOT,
                    requirements=pins)
    assert spec["runtime_env"]["working_dir"] == str(ROOT) and spec["runtime_env"]["pip"] == pins
    assert ".venv" in spec["runtime_env"]["excludes"]
    _check_vocadapt_command("vocadapt " + spec["entrypoint"].split("python -m vocadapt.cli.app ", 1)[1])
    with pytest.raises(UserError, match="nothing to submit"):
        job_spec([], working_dir=ROOT)


def test_submit_without_a_cluster_says_how_to_start_one():
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["submit", "--address", "http://127.0.0.1:9", "--no-install", "--no-follow",
                                      "--", "lapt"])
    assert result.exit_code == 2
    assert "ray start --head" in result.output
