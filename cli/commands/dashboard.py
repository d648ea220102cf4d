"""``vocadapt dashboard``: the Streamlit app in dashboards/ over an MLflow store (local SQLite or a server)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import typer

from vocadapt.cli.errors import user_errors

from vocadapt.components.errors import UserError


def app_path() -> Path:
    """The Streamlit script, found through the ``vocadapt.dashboards`` namespace portion."""
    import vocadapt.dashboards

    for folder in vocadapt.dashboards.__path__:
        candidate = Path(folder) / "app.py"
        if candidate.is_file():
            return candidate
    raise UserError("the dashboard app (dashboards/app.py) is not installed: reinstall vocadapt")


def dashboard_command_line(port: int, address: str = "127.0.0.1") -> list[str]:
    return [
        sys.executable, "-m", "streamlit", "run", str(app_path()), "--server.headless", "true",
        "--server.address", address, "--server.port", str(port), "--browser.gatherUsageStats", "false",
        "--global.developmentMode", "false",
    ]


def dashboard_environment(tracking_uri: str, experiment: str | None) -> dict[str, str]:
    env = {**os.environ, "MLFLOW_TRACKING_URI": tracking_uri}
    if experiment:
        env["VOCADAPT_DASHBOARD_EXPERIMENT"] = experiment
    return env


def register(app: typer.Typer) -> None:
    @app.command("dashboard")
    def dashboard_command(
        tracking_uri: Optional[str] = typer.Option(
            None, "--tracking-uri", help="MLflow store (default: $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db here)."
        ),
        experiment: Optional[str] = typer.Option(None, "--experiment", help="Experiment selected at start."),
        port: int = typer.Option(8501, "--port", min=1, max=65535, help="Port on 127.0.0.1."),
        address: str = typer.Option("127.0.0.1", "--address", help="Address to serve on (0.0.0.0 to share)."),
    ) -> None:
        """Compare runs: fertility, bits per byte, loss curves, benchmarks, throughput, similarity, registry."""
        from vocadapt.platform.tracking import DEFAULT_DB, resolve_tracking_uri

        with user_errors():
            uri = resolve_tracking_uri(tracking_uri)
            if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).is_file():
                raise UserError(f"no MLflow store at {uri}: run `vocadapt adapt` here first (it writes {DEFAULT_DB}) "
                                "or pass --tracking-uri")
            typer.echo(f"dashboard on http://{address}:{port} reading {uri}")
            command = dashboard_command_line(port, address)
            completed = subprocess.run(command, env=dashboard_environment(uri, experiment))
        raise typer.Exit(completed.returncode)
