"""The console's LAPT bars: rank 0 writes its figures to a file, the driver draws a bar per phase from it."""

from __future__ import annotations

import functools
import io

from vocadapt.platform.lapt import progress as lapt_progress


def test_a_bar_per_phase_and_a_phase_recorded_every_five_percent(tmp_path, monkeypatch):
    from tqdm import tqdm

    progress_file = tmp_path / "progress.json"
    monkeypatch.setenv(lapt_progress.PROGRESS_ENV, str(progress_file))
    step, phase = lapt_progress.worker_progress(0, 3), lapt_progress.worker_phase_progress(0)
    assert lapt_progress.worker_phase_progress(1) is None  # only rank 0 writes
    console = io.StringIO()
    bars = lapt_progress._PhaseBars(functools.partial(tqdm, file=console, ascii=True), 3)
    for number in (1, 2, 3):
        step(number, {"loss": 4.0 - number})
        bars.show(progress_file)
    writes = []
    real_write = lapt_progress._write_figures
    monkeypatch.setattr(lapt_progress, "_write_figures", lambda path, figures: (writes.append(figures),
                                                                                 real_write(path, figures)))
    for done in range(1001):
        phase("head fit: updates", done, 1000)
        bars.show(progress_file)
    bars.close()
    assert len(writes) == lapt_progress.PHASE_REDRAWS + 1  # 0%, 5%, ..., 100%: a log gets about 20 lines of it
    text = console.getvalue()
    assert "LAPT: 100%" in text and "loss=1.000" in text
    assert "head fit: updates: 100%" in text and "1000/1000" in text
