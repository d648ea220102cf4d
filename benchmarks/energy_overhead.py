"""What measuring energy costs: codecarbon's start and stop (``platform.energy.measure_energy``), and the slowdown of
a CPU-bound torch workload run inside a measurement against the same workload bare.

    python benchmarks/energy_overhead.py [--rounds 6] [--work-seconds 3]

Start and stop: the first measurement in a process also detects the hardware (on a CPU-only machine codecarbon
matches the CPU model against its TDP table), later ones reuse it; medians over 20 warm measurements. Slowdown:
bare and measured runs alternate, each first in every other round, so drift on a shared machine hits both alike; the figure is the median ratio of
matrix products per second, measured / bare (one torch thread); on a machine shared with other jobs it is noisy,
so the tracker's own cost is also given as the CPU time this process spends while it only waits inside a
measurement. Goal: start + stop under 50 ms warm, the tracker's threads under 1% of a core.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time


def _matmuls(seconds: float) -> float:
    """Matrix products per second for ``seconds``."""
    import torch

    a, b = torch.randn(256, 256), torch.randn(256, 256)
    count, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        a = torch.tanh(a @ b)
        count += 1
    return count / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--work-seconds", type=float, default=3.0)
    parser.add_argument("--country", default="ITA")
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    args = parser.parse_args()

    from vocadapt.platform.energy import MEASURE_SECONDS, measure_energy

    os.chdir(tempfile.mkdtemp(prefix="energy-overhead-"))  # and check nothing lands in the working folder
    started = time.perf_counter()
    with measure_energy("first", country_iso_code=args.country) as reading:
        entered = time.perf_counter()
    first = {"start_s": entered - started, "stop_s": time.perf_counter() - entered}
    starts, stops = [], []
    for _ in range(20):
        started = time.perf_counter()
        with measure_energy("warm", country_iso_code=args.country):
            entered = time.perf_counter()
        stops.append(time.perf_counter() - entered)
        starts.append(entered - started)
    # what the tracker's own threads cost, independent of other load on the machine: this process's CPU time
    # while it only waits inside a measurement
    cpu, wall = time.process_time(), time.perf_counter()
    with measure_energy("idle", country_iso_code=args.country):
        time.sleep(args.idle_seconds)
    idle_share = (time.process_time() - cpu) / (time.perf_counter() - wall)
    import torch

    torch.set_num_threads(1)  # one core for the workload, the other for the machine's noise
    _matmuls(1.0)  # warm the torch kernels
    bare, measured, readings = [], [], []
    for round_ in range(args.rounds):
        for measuring in (round_ % 2 == 0, round_ % 2 == 1):  # bare first in even rounds, measured first in odd
            if not measuring:
                bare.append(_matmuls(args.work_seconds))
                continue
            with measure_energy("work", country_iso_code=args.country) as reading:
                measured.append(_matmuls(args.work_seconds))
            readings.append(reading)
    ratios = [m / b for m, b in zip(measured, bare)]
    result = {
        "measure_seconds": MEASURE_SECONDS, "mode": readings[-1].mode,
        "first_start_s": round(first["start_s"], 4), "first_stop_s": round(first["stop_s"], 4),
        "warm_start_ms": round(1000 * statistics.median(starts), 2),
        "warm_stop_ms": round(1000 * statistics.median(stops), 2),
        "tracker_cpu_share_while_idle": round(idle_share, 5),
        "bare_matmuls_per_s": round(statistics.median(bare), 1),
        "measured_matmuls_per_s": round(statistics.median(measured), 1),
        "measured_over_bare": round(statistics.median(ratios), 4),
        "work_wh_per_round": round(1000 * statistics.median(r.kwh for r in readings), 5),
        "files_written": os.listdir("."),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
