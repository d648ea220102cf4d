"""Wall time and peak memory of the demo (`vocadapt adapt configs/italian-smollm2.yaml`) on this machine.

Peak memory is the largest total resident set of the whole process tree (driver, Ray processes and workers),
sampled every 0.2 s with psutil, since Ray workers are not the driver's direct children.
Goal: the whole demo within 10 minutes on a 2-core machine.

    python benchmarks/demo.py [--config configs/italian-smollm2.yaml] [--set key=value ...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

GOAL_SECONDS = 600


def tree_rss(process: psutil.Process) -> int:
    total = 0
    for member in [process, *process.children(recursive=True)]:
        try:
            total += member.memory_info().rss
        except psutil.Error:
            pass
    return total


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="configs/italian-smollm2.yaml")
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    args = parser.parse_args()
    vocadapt = Path(sys.executable).with_name("vocadapt")
    command = [str(vocadapt), "adapt", args.config, *[a for o in args.overrides for a in ("--set", o)]]
    started = time.perf_counter()
    child = subprocess.Popen(command, env=os.environ.copy())
    watched = psutil.Process(child.pid)
    peak = 0
    while child.poll() is None:
        peak = max(peak, tree_rss(watched))
        time.sleep(0.2)
    wall = time.perf_counter() - started
    print(f"demo: exit {child.returncode}, wall {wall:.1f} s (goal <= {GOAL_SECONDS} s: "
          f"{'met' if wall <= GOAL_SECONDS else 'missed'}), peak tree RSS {peak / 2**30:.2f} GiB, "
          f"cpus {os.cpu_count()}")
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
