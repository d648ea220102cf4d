"""What the Ray Train LAPT tests share (test_ray_lapt.py, test_multinode.py and quiet_console_run.py): a tiny model
folder beside Italian and English text files, the settings and inputs of a tiny run, and the production train loop
with a hook after each optimizer step, to kill or stall a worker there."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Callable

from tests.training.lapt_tiny_world import ENGLISH, ITALIAN, make_model, make_tokenizer


def write_lapt_world(root: Path, *, streaming: bool = False) -> Path:
    """``root/model`` (a 2-layer Llama with its tokenizer), ``root/it.txt`` and ``root/en.txt``; with ``streaming``
    also the same Italian as two JSON Lines files (``it-0.jsonl``, ``it-1.jsonl``), for a streaming dataset."""
    root.mkdir(parents=True, exist_ok=True)
    tokenizer = make_tokenizer()
    make_model(len(tokenizer)).save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    (root / "it.txt").write_text("\n".join(ITALIAN * 4), encoding="utf-8")
    (root / "en.txt").write_text("\n".join(ENGLISH * 4), encoding="utf-8")
    if streaming:
        for part in range(2):
            lines = (ITALIAN * 4)[part * 16 : part * 16 + 16]
            (root / f"it-{part}.jsonl").write_text("".join(json.dumps({"text": text}) + "\n" for text in lines),
                                                   encoding="utf-8")
    return root


def streaming_italian(world: Path) -> dict[str, Any]:
    """The Italian of ``write_lapt_world(streaming=True)`` as a streaming Hugging Face dataset (local JSON Lines)."""
    return {"dataset": "json", "data_files": [str(world / f"it-{part}.jsonl") for part in range(2)],
            "streaming": True}


def lapt_settings(**overrides: Any) -> dict[str, Any]:
    """A tiny LAPT on two workers: 6 steps of 2 x 16 tokens, a checkpoint every 2 steps."""
    return {**dict(max_steps=6, batch_size=2, sequence_length=16, learning_rate=1e-2, warmup_steps=1, num_workers=2,
                   checkpoint_every=2, log_every=1, eval_every=3), **overrides}


def lapt_inputs(world: Path, name: str, **overrides: Any) -> dict[str, Any]:
    """The inputs, placement and tracking of ``plan_lapt`` / ``run_lapt_on_ray`` for run ``name`` in ``world``, as
    keywords; ``overrides`` name a field of any of the three."""
    from vocadapt.platform.lapt.ray_train import LaptInputs, LaptPlacement, LaptTracking

    values = {**dict(target_files=[world / "it.txt"], source_files=[world / "en.txt"],
                     eval_documents={"target": ITALIAN[:2], "source": ENGLISH[:2]}, output_dir=world / name,
                     run_name=name, storage_path=world / "ray"), **overrides}
    groups = {"inputs": LaptInputs, "placement": LaptPlacement, "tracking": LaptTracking}
    return {key: group(**{field.name: values[field.name] for field in dataclasses.fields(group)
                          if field.name in values}) for key, group in groups.items()}


def hooked_train_loop(after_step: Callable[[int], None],
                      on_start: Callable[[], None] | None = None,
                      losses: str | None = None) -> Callable[[dict], None]:
    """The production train loop (``lapt_worker``), calling ``on_start()`` in each worker as it starts and
    ``after_step(done)`` after each optimizer step (after the loop's own step hook); with ``losses`` (a file), rank 0
    appends ``{"attempt": its pid, "step", "loss"}`` there after each step, before ``after_step``. A closure, so Ray's
    cloudpickle sends it (and the closures it holds) by value instead of by a module path the workers would have to
    import."""

    def record_loss(done: int, metrics: dict) -> None:  # rank 0 appends one JSON line, its process id the attempt
        import os

        import ray.train

        if ray.train.get_context().get_world_rank() == 0:
            with open(losses, "a", encoding="utf-8") as log:
                log.write(json.dumps({"attempt": os.getpid(), "step": done, "loss": float(metrics["loss"])}) + "\n")

    def train_loop(config: dict) -> None:
        from vocadapt.components import training
        from vocadapt.platform.lapt.worker import lapt_worker

        if on_start is not None:
            on_start()
        train_lapt = training.train_lapt

        def hooked_train_lapt(*args, hooks, **kwargs):
            def hook(done: int, metrics: dict) -> None:
                hooks.on_step(done, metrics)
                if losses is not None:
                    record_loss(done, metrics)
                after_step(done)

            return train_lapt(*args, hooks=dataclasses.replace(hooks, on_step=hook), **kwargs)

        training.train_lapt = hooked_train_lapt  # this worker process only
        try:
            lapt_worker(config)
        finally:
            training.train_lapt = train_lapt

    return train_loop


def kill_once(rank: int, step: int, marker: str, pause: float = 0.0) -> Callable[[int], None]:
    """An ``after_step`` hook: worker ``rank`` kills itself (SIGKILL) right after optimizer step ``step``, once (the
    marker file it writes first keeps the restarted worker alive), ``pause`` seconds after writing the marker."""

    def after_step(done: int) -> None:
        import os
        import time
        from pathlib import Path

        import ray.train

        if ray.train.get_context().get_world_rank() == rank and done == step and not Path(marker).exists():
            Path(marker).write_text(str(os.getpid()), encoding="utf-8")
            time.sleep(pause)
            os.kill(os.getpid(), 9)

    return after_step


def losses_by_attempt(losses: Path) -> list[dict[int, float]]:
    """The losses ``hooked_train_loop(losses=...)`` recorded: {step: loss} for each attempt, in order."""
    attempts: dict[int, dict[int, float]] = {}
    for line in losses.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        attempts.setdefault(record["attempt"], {})[record["step"]] = record["loss"]
    return list(attempts.values())
