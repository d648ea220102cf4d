"""Whether the cluster a LAPT run will use can ever place its workers, decided before anything is written.

Ray Train waits for the resources its workers ask for: a run asking for GPUs on a machine without any, or for more
CPUs than an already started local cluster has, waited for ever with nothing on the console (seen: ``lapt.use_gpu:
true`` on this 2-core CPU machine, still waiting after 400 s). A cluster vocadapt starts on this machine
(``init_ray``, no ``RAY_ADDRESS``) or one already started in this process cannot grow, so a shortfall there is
refused, naming what is missing and the settings that fix it. A cluster named by ``RAY_ADDRESS`` may add nodes (an
autoscaler), so a shortfall there is printed as a warning and Ray waits.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from vocadapt.components.errors import UserError
from vocadapt.platform.config.lapt_sections import LaptSection


def worker_request(section: LaptSection, worker_resources: dict[str, float] | None = None) -> dict[str, float]:
    """What one Ray Train worker asks for: ``_fit``'s ``resources_per_worker``, and what the checks compare."""
    return {"CPU": float(section.cpus_per_worker), **(worker_resources or {}),
            **({"GPU": 1.0} if section.use_gpu else {})}


def resource_shortfall(section: LaptSection, available: dict[str, float],
                       worker_resources: dict[str, float] | None = None) -> list[str]:
    """Each resource the run's workers need in all that ``available`` (a cluster's totals) lacks, as
    'GPU: 2 needed (1 a worker x 2 workers), 0 in the cluster'; empty when every one is there."""
    missing = []
    for name, each in worker_request(section, worker_resources).items():
        needed = each * section.num_workers
        have = float(available.get(name, 0.0))
        if needed > have:
            missing.append(f"{name}: {needed:g} needed ({each:g} a worker x {section.num_workers} workers), "
                           f"{have:g} in the cluster")
    return missing


def local_cluster_cpus(section: LaptSection) -> int:
    """The CPUs of the cluster ``_fit`` starts on this machine (``init_ray``): its workers' CPUs, at least 2."""
    return max(2, section.num_workers * section.cpus_per_worker)


def visible_gpus() -> int:
    """The GPUs torch sees here (``CUDA_VISIBLE_DEVICES`` respected, as Ray counts them)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def local_cluster_resources(section: LaptSection) -> dict[str, float]:
    """What ``init_ray`` gives a LAPT run on this machine: CPUs sized to its workers, the GPUs torch sees, no
    custom resources."""
    return {"CPU": float(local_cluster_cpus(section)), "GPU": float(visible_gpus())}


def check_lapt_resources(section: LaptSection, worker_resources: dict[str, float] | None = None, *,
                         warn: Callable[[str], None] | None = None) -> None:
    """Refuse a LAPT run whose workers can never be placed (``UserError``), before it writes anything.

    ``lapt.runner: in_process`` with ``lapt.use_gpu`` needs a CUDA device in this process. On Ray: the cluster
    already started in this process, or the one ``init_ray`` would start here, must hold every worker's
    resources. A shortfall on a ``RAY_ADDRESS`` cluster goes to ``warn`` (None: said nothing of it); ``_fit``
    checks again once connected and warns there, so a run says it once."""
    if section.runner == "in_process":
        if section.use_gpu:
            import torch

            if not torch.cuda.is_available():
                raise UserError("lapt.use_gpu is true but this process sees no CUDA device; set lapt.use_gpu "
                                "false, or run where a GPU is visible")
        return
    import ray

    remote = bool(os.environ.get("RAY_ADDRESS"))
    if ray.is_initialized():
        available = ray.cluster_resources()
    elif remote:
        return  # not connected yet: _fit checks once it is
    else:
        available = local_cluster_resources(section)
    missing = resource_shortfall(section, available, worker_resources)
    if not missing:
        return
    if remote:
        if warn is not None:
            warn(f"LAPT's workers need more than the Ray cluster at {os.environ['RAY_ADDRESS']} has now "
                 f"({'; '.join(missing)}); Ray Train waits until nodes that have it join (an autoscaler), and for "
                 "ever if none do")
        return
    fixes = ["lapt.use_gpu false" if section.use_gpu else None,
             f"fewer workers (lapt.num_workers, now {section.num_workers})",
             "RAY_ADDRESS pointing at a cluster that has them"]
    raise UserError(f"LAPT's {section.num_workers} Ray Train workers can never be placed on the local Ray cluster "
                    f"on this machine ({'; '.join(missing)}), so Ray would wait for ever; set "
                    f"{', or '.join(fix for fix in fixes if fix)}")


def trial_lapt_workers(section: LaptSection) -> dict[str, float]:
    """What a sweep trial's LAPT asks for beyond the trial's own reservation: its Ray Train workers' CPUs and GPUs
    (nothing when LAPT does not run, or runs in the trial's process, on the trial's reservation)."""
    if not section.runs or section.runner == "in_process":
        return {"CPU": 0.0, "GPU": 0.0}
    request = worker_request(section)
    return {name: request.get(name, 0.0) * section.num_workers for name in ("CPU", "GPU")}


def sweep_deadlock(trial: dict[str, float], lapt_workers: dict[str, float], concurrent: int,
                   available: dict[str, float]) -> list[str]:
    """Why trials that each hold ``trial`` (Tune's reservation) and then start a LAPT worker group asking for
    ``lapt_workers`` could wait for ever on a cluster of ``available``: Tune starts as many trials as their own
    reservations allow (at most ``concurrent``), and a trial's LAPT then needs what those trials left free; if that
    is less than one group, every trial waits on the others. Empty when the sweep can always progress."""
    problems = []
    started = concurrent
    for name, each in trial.items():
        if each > 0:
            started = min(started, int(available.get(name, 0.0) // each))
    for name in ("CPU", "GPU"):
        have, held, group = float(available.get(name, 0.0)), trial.get(name, 0.0), lapt_workers.get(name, 0.0)
        if held + group > have:
            problems.append(f"{name}: one trial holds {held:g} and its LAPT workers ask for {group:g} more, "
                            f"{have:g} in the cluster")
        elif started > 0 and group > 0 and have - started * held < group:
            problems.append(f"{name}: {started} trials at once hold {started * held:g} of {have:g}, leaving "
                            f"{have - started * held:g} for a LAPT worker group that asks for {group:g}")
    return problems
