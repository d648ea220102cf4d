"""LAPT's progress on the user's console while Ray's own output goes to its log files.

Rank 0 writes its step and loss to a small JSON file after every optimizer step (:func:`worker_progress`); the
driver draws one tqdm bar from that file while ``fit`` runs (:func:`follow_progress`).
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path


PROGRESS_FILE = "progress.json"
PROGRESS_ENV = "VOCADAPT_LAPT_PROGRESS_FILE"


def worker_progress(rank: int, total_steps: int):
    """Rank 0 records its progress after every optimizer step in the file the driver follows (``PROGRESS_ENV``);
    without one (a worker started by something else) it shows a tqdm bar in its own output."""
    path = os.environ.get(PROGRESS_ENV) if rank == 0 else None
    if path:
        def record(step: int, metrics: dict) -> None:
            figures = {"step": step, "total": total_steps, "loss": float(metrics["loss"])}
            Path(path + ".tmp").write_text(json.dumps(figures), encoding="utf-8")
            os.replace(path + ".tmp", path)  # the driver never reads half a file

        return record
    from tqdm import tqdm

    bar = tqdm(total=total_steps, desc="LAPT", unit="step", disable=rank != 0)

    def hook(step: int, metrics: dict) -> None:
        bar.n = step
        bar.set_postfix(loss=f"{metrics['loss']:.3f}", refresh=True)

    return hook


@contextmanager
def follow_progress(progress_file: Path, total_steps: int, every: float = 1.0):
    """A tqdm bar in the driver that follows rank 0's progress file while ``fit`` runs (worker output stays in
    Ray's logs, whose folder is printed first). The file is on rank 0's node: a multi-node run shows it where the
    storage path is shared."""
    import threading

    from tqdm import tqdm

    print(f"  Ray's own output (controller, workers): {ray_logs_dir()}", flush=True)
    bar, done = tqdm(total=total_steps, desc="LAPT", unit="step"), threading.Event()

    def poll() -> None:
        while not done.wait(every):
            _show_progress(bar, progress_file)

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        _show_progress(bar, progress_file)
        bar.close()


def _show_progress(bar, progress_file: Path) -> None:
    try:
        figures = json.loads(progress_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # not written yet
    if figures["step"] == bar.n:
        return  # redrawn only when a step ends: a console that is not a terminal gets one line per redraw
    bar.total = figures["total"]
    bar.n = figures["step"]
    bar.set_postfix(loss=f"{figures['loss']:.3f}", refresh=True)


def ray_logs_dir() -> str:
    """Where this process's Ray session keeps every worker's and actor's stdout and stderr (``worker-*.out``)."""
    import ray

    try:
        return ray._private.worker._global_node.get_logs_dir_path()  # no public accessor in Ray 2.60
    except AttributeError:
        return "the Ray session's logs folder (/tmp/ray/session_latest/logs on a local cluster)"
