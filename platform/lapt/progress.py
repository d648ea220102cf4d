"""LAPT's progress on the user's console while Ray's own output goes to its log files.

Rank 0 writes its step and loss to a small JSON file after every optimizer step (:func:`worker_progress`), and how
far the steps that are not optimizer steps are (the head fit's forwards and updates: :func:`worker_phase_progress`,
a phase named in the file); the driver draws a tqdm bar per phase from that file while ``fit`` runs
(:func:`follow_progress`).
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path


PROGRESS_FILE = "progress.json"
PROGRESS_ENV = "VOCADAPT_LAPT_PROGRESS_FILE"
LAPT_PHASE = "LAPT"
PHASE_REDRAWS = 20  # a phase is recorded (and redrawn) every 5% of its work: a log gets about 20 lines of it


def worker_progress(rank: int, total_steps: int, progress_file: str | None = None):
    """Rank 0 records its progress after every optimizer step in the file the driver follows (``progress_file``,
    default ``PROGRESS_ENV``); without one (a worker started by something else) it shows a tqdm bar in its own
    output."""
    path = (progress_file or os.environ.get(PROGRESS_ENV)) if rank == 0 else None
    if path:
        def record(step: int, metrics: dict) -> None:
            _write_figures(path, {"phase": LAPT_PHASE, "step": step, "total": total_steps,
                                  "loss": float(metrics["loss"])})

        return record
    from tqdm import tqdm

    bar = tqdm(total=total_steps, desc="LAPT", unit="step", disable=rank != 0)

    def hook(step: int, metrics: dict) -> None:
        bar.n = step
        bar.set_postfix(loss=f"{metrics['loss']:.3f}", refresh=True)

    return hook


def worker_phase_progress(rank: int, progress_file: str | None = None):
    """Rank 0 records how far a phase that is not an optimizer step is (``LaptHooks.on_phase(phase, done, total)``),
    every 5% of it, in the file the driver follows (``progress_file``, default ``PROGRESS_ENV``); None elsewhere
    (without a file the phase shows nothing)."""
    path = (progress_file or os.environ.get(PROGRESS_ENV)) if rank == 0 else None
    if not path:
        return None
    shown: dict[str, int] = {}

    def record(phase: str, done: int, total: int) -> None:
        mark = done * PHASE_REDRAWS // max(1, total)
        if shown.get(phase) == mark:
            return
        shown[phase] = mark
        _write_figures(path, {"phase": phase, "step": done, "total": total})

    return record


def _write_figures(path: str, figures: dict) -> None:
    Path(path + ".tmp").write_text(json.dumps(figures), encoding="utf-8")
    os.replace(path + ".tmp", path)  # the driver never reads half a file


@contextmanager
def follow_progress(progress_file: Path, total_steps: int, every: float = 1.0, *, on_ray: bool = True):
    """A tqdm bar in the driver that follows rank 0's progress file while ``fit`` runs (worker output stays in
    Ray's logs, whose folder is printed first when ``on_ray``). The file is on rank 0's node: a multi-node run shows
    it where the storage path is shared."""
    import threading

    from tqdm import tqdm

    if on_ray:
        print(f"  Ray's own output (controller, workers): {ray_logs_dir()}", flush=True)
    bars, done = _PhaseBars(tqdm, total_steps), threading.Event()

    def poll() -> None:
        while not done.wait(every):
            bars.show(progress_file)

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        bars.show(progress_file)
        bars.close()


class _PhaseBars:
    """One tqdm bar for the phase the progress file names: LAPT's steps first, then (with a head fit) its forwards
    and its updates, each bar closed when the next phase starts."""

    def __init__(self, tqdm, total_steps: int):
        self._tqdm = tqdm
        self.phase = LAPT_PHASE
        self.bar = tqdm(total=total_steps, desc=LAPT_PHASE, unit="step")

    def show(self, progress_file: Path) -> None:
        try:
            figures = json.loads(progress_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return  # not written yet
        phase = figures.get("phase", LAPT_PHASE)
        if phase != self.phase:
            self.bar.close()
            self.phase = phase
            self.bar = self._tqdm(total=figures["total"], desc=phase, unit="step" if phase == LAPT_PHASE else "it")
        if figures["step"] == self.bar.n:
            return  # redrawn only when a step ends: a console that is not a terminal gets one line per redraw
        self.bar.total = figures["total"]
        self.bar.n = figures["step"]
        if "loss" in figures:
            self.bar.set_postfix(loss=f"{figures['loss']:.3f}", refresh=True)
        else:
            self.bar.refresh()

    def close(self) -> None:
        self.bar.close()


def ray_logs_dir() -> str:
    """Where this process's Ray session keeps every worker's and actor's stdout and stderr (``worker-*.out``)."""
    import ray

    try:
        return ray._private.worker._global_node.get_logs_dir_path()  # no public accessor in Ray 2.60
    except AttributeError:
        return "the Ray session's logs folder (/tmp/ray/session_latest/logs on a local cluster)"
