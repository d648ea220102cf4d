"""A tiny LAPT run on Ray Train, then one whose worker fails, as a user's console shows them (run as a script by
test_quiet_console.py, which counts what it prints)."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.training.lapt_tiny_world import ENGLISH, ITALIAN, make_model, make_tokenizer


def failing_loop(config: dict) -> None:
    raise ValueError("the worker broke on purpose")


def main(root: Path) -> None:
    from vocadapt.platform.ray_train import fit_lapt, plan_lapt, run_lapt_on_ray

    tokenizer = make_tokenizer()
    make_model(len(tokenizer)).save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    (root / "it.txt").write_text("\n".join(ITALIAN * 4), encoding="utf-8")
    (root / "en.txt").write_text("\n".join(ENGLISH * 4), encoding="utf-8")
    settings = dict(max_steps=4, batch_size=2, sequence_length=16, learning_rate=1e-2, warmup_steps=1, num_workers=1,
                    checkpoint_every=2, log_every=1, eval_every=4, max_failures=0)
    inputs = dict(target_files=[root / "it.txt"], source_files=[root / "en.txt"],
                  eval_documents={"target": ITALIAN[:2], "source": ENGLISH[:2]}, storage_path=root / "ray")
    result = run_lapt_on_ray(root / "model", root / "model", settings, output_dir=root / "ok", run_name="ok", **inputs)
    print(f"=== trained {result.steps} steps", flush=True)
    plan = plan_lapt(root / "model", root / "model", settings, output_dir=root / "bad", run_name="bad", **inputs)
    try:
        fit_lapt(failing_loop, plan)
    except RuntimeError as error:
        print(f"=== failed: {error}", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
