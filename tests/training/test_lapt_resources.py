"""LAPT's workers must fit the cluster that runs them, decided before anything is written: a shortfall on a cluster
vocadapt starts here (which cannot grow) is refused, naming each missing resource and the settings that fix it.
The whole commands' refusals are cases of tests/pipelines/test_bad_input_commands.py; a cluster already started in
the process (and one named by RAY_ADDRESS, warned about) is tests/training/test_ray_lapt.py's, on its real cluster."""

from __future__ import annotations

import pytest

from vocadapt.components.errors import UserError
from vocadapt.platform.config.lapt_sections import LaptSection
from vocadapt.platform.lapt.resources import check_lapt_resources, local_cluster_resources, resource_shortfall


def section(**fields) -> LaptSection:
    return LaptSection.model_validate({"runner": "ray", **fields})


def test_the_shortfall_names_each_resource_per_worker_and_in_all():
    wanted = section(num_workers=2, cpus_per_worker=3, use_gpu=True)
    missing = resource_shortfall(wanted, {"CPU": 4.0, "GPU": 1.0, "node": 1.0}, {"node": 1.0})
    assert missing == ["CPU: 6 needed (3 a worker x 2 workers), 4 in the cluster",
                       "node: 2 needed (1 a worker x 2 workers), 1 in the cluster",
                       "GPU: 2 needed (1 a worker x 2 workers), 1 in the cluster"]
    assert resource_shortfall(wanted, {"CPU": 6.0, "GPU": 2.0, "node": 2.0}, {"node": 1.0}) == []


def test_the_local_cluster_is_sized_to_the_workers_cpus_and_has_this_machines_gpus():
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    assert local_cluster_resources(section(num_workers=3, cpus_per_worker=2)) == {"CPU": 6.0, "GPU": float(gpus)}
    assert local_cluster_resources(section(num_workers=1))["CPU"] == 2.0  # init_ray's floor


def test_gpu_workers_beyond_this_machines_gpus_are_refused_before_ray_starts(monkeypatch):
    import ray
    import torch

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    with pytest.raises(UserError) as refused:
        check_lapt_resources(section(num_workers=gpus + 1, use_gpu=True))
    message = str(refused.value)
    assert f"GPU: {gpus + 1} needed" in message and "local Ray cluster" in message
    assert "lapt.use_gpu false" in message and "lapt.num_workers" in message and "RAY_ADDRESS" in message
    assert not ray.is_initialized()  # decided without starting a cluster
    check_lapt_resources(section(num_workers=4, cpus_per_worker=2))  # CPUs: init_ray sizes the cluster to them


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this process sees a CUDA device")
def test_in_process_gpu_training_needs_a_cuda_device_here():
    with pytest.raises(UserError, match="lapt.use_gpu is true but this process sees no CUDA device"):
        check_lapt_resources(section(runner="in_process", use_gpu=True))
    check_lapt_resources(section(runner="in_process"))


def test_a_ray_address_cluster_not_yet_connected_is_checked_once_connected(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")  # nothing is contacted before _fit connects
    check_lapt_resources(section(num_workers=64, use_gpu=True), warn=pytest.fail)
