"""A tiny LAPT run on Ray Train, then one whose worker fails, as a user's console shows them (run as a script by
test_quiet_console.py, which counts what it prints)."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.training.ray_lapt_world import lapt_inputs, lapt_settings, write_lapt_world


def failing_loop(config: dict) -> None:
    raise ValueError("the worker broke on purpose")


def main(root: Path) -> None:
    from vocadapt.platform.lapt.ray_train import fit_lapt, plan_lapt, run_lapt_on_ray

    write_lapt_world(root)
    settings = lapt_settings(max_steps=4, num_workers=1, eval_every=4, max_failures=0)
    result = run_lapt_on_ray(root / "model", root / "model", settings, **lapt_inputs(root, "ok"))
    print(f"=== trained {result.steps} steps", flush=True)
    plan = plan_lapt(root / "model", root / "model", settings, **lapt_inputs(root, "bad"))
    try:
        fit_lapt(failing_loop, plan)
    except RuntimeError as error:
        print(f"=== failed: {error}", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
