"""``vocadapt sweep``: Ray Tune over a search space of adapt configs, tracked as one MLflow parent run."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from vocadapt.cli.errors import EXIT_INTERRUPTED, user_errors
from vocadapt.components.errors import UserError


def register(app: typer.Typer) -> None:
    @app.command("sweep")
    def sweep_command(
        config_arg: Optional[Path] = typer.Argument(None, metavar="[CONFIG]", help="Sweep YAML (or use --config)."),
        config_opt: Optional[Path] = typer.Option(
            None, "--config", help="Sweep YAML, e.g. configs/sweeps/italian-smollm2.yaml."
        ),
        set_: list[str] = typer.Option([], "--set", help="Dotted override of a sweep field, e.g. "
                                       "budget.max_concurrent_trials=1 (repeatable)."),
        resume: bool = typer.Option(False, "--resume", help="Continue an interrupted sweep (same parent run)."),
        retry_failed: bool = typer.Option(True, "--retry-failed/--keep-failed",
                                          help="On --resume, run failed trials again from scratch."),
    ) -> None:
        """Run a sweep: ASHA on held-out target bits per byte, leaderboard in MLflow, best trial registered."""
        from vocadapt.pipelines.sweep import run_sweep
        from vocadapt.platform.sweeps.tune import load_sweep_config

        with user_errors():
            path = config_opt or config_arg
            if path is None:
                raise UserError("no sweep config given; pass --config configs/sweeps/italian-smollm2.yaml")
            sweep = load_sweep_config(path, set_)
            result = run_sweep(sweep, resume=resume, retry_failed=retry_failed)
        if result.interrupted:
            typer.echo(f"sweep {sweep.name} was interrupted before every trial ended: nothing was registered; "
                       f"continue it with `vocadapt sweep --config {path} --resume`", err=True)
            raise typer.Exit(code=EXIT_INTERRUPTED)
        if result.best is None:
            typer.echo("no trial finished; see the leaderboard above and the failed runs in MLflow", err=True)
            raise typer.Exit(code=1)
