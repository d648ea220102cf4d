"""``vocadapt submit``: run any vocadapt command as a job on a Ray cluster."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Optional

import typer

from vocadapt.cli.errors import user_errors

# What the job's working directory upload leaves out: caches, virtual environments, run outputs, stores.
EXCLUDES = [".git", ".venv", "**/__pycache__", "runs", "mlruns", "mlartifacts", "*.db", "*.egg-info", ".pytest_cache"]


def job_spec(command: list[str], *, working_dir: Path, requirements: list[str] | None = None,
             env: dict[str, str] | None = None) -> dict:
    """The entrypoint and runtime_env of a Ray job running ``vocadapt <command>`` from ``working_dir``."""
    if not command:
        raise ValueError("nothing to submit: give the vocadapt command to run, e.g. `vocadapt submit -- lapt "
                         "configs/italian-smollm2.yaml`")
    runtime_env: dict = {"working_dir": str(working_dir), "excludes": EXCLUDES, "env_vars": dict(env or {})}
    if requirements:
        runtime_env["pip"] = requirements
    # the uploaded working dir is the repository: install it (not its dependencies, which runtime_env pins) so
    # the four folders import as `vocadapt`, then run the command
    entrypoint = "pip install --quiet --no-deps . && vocadapt " + " ".join(shlex.quote(part) for part in command)
    return {"entrypoint": entrypoint, "runtime_env": runtime_env}


def pinned_requirements(pyproject: Path) -> list[str]:
    """The exact pins of ``pyproject.toml``'s dependencies (what the cluster's job environment installs)."""
    import tomllib

    if not pyproject.is_file():
        raise FileNotFoundError(f"{pyproject} not found; run `vocadapt submit` from the repository root")
    return list(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"])


def register(app: typer.Typer) -> None:
    @app.command("submit", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def submit_command(
        context: typer.Context,
        address: str = typer.Option("http://127.0.0.1:8265", "--address", envvar="RAY_ADDRESS",
                                    help="Ray dashboard/job server address of the cluster."),
        working_dir: Path = typer.Option(Path("."), "--working-dir", help="Repository root uploaded as the job's "
                                         "working directory."),
        install: bool = typer.Option(True, "--install/--no-install", help="Install the pinned requirements in the "
                                     "job's environment (off when the cluster image already has them)."),
        follow: bool = typer.Option(True, "--follow/--no-follow", help="Stream the job's logs until it ends."),
    ) -> None:
        """Submit a vocadapt command as a Ray job: `vocadapt submit -- lapt configs/x.yaml --set lapt.num_workers=8`."""
        with user_errors(FileNotFoundError, ValueError, ConnectionError):
            spec = job_spec(list(context.args), working_dir=working_dir.resolve(),
                            requirements=pinned_requirements(working_dir / "pyproject.toml") if install else None)
            job_id = _submit(address, spec, follow)
        typer.echo(job_id)


def _submit(address: str, spec: dict, follow: bool) -> str:
    import asyncio

    from ray.job_submission import JobSubmissionClient

    try:
        client = JobSubmissionClient(address)
    except Exception as error:
        raise ConnectionError(f"no Ray job server at {address} ({error}); start one with `ray start --head` or "
                              "pass --address / RAY_ADDRESS") from error
    job_id = client.submit_job(entrypoint=spec["entrypoint"], runtime_env=spec["runtime_env"])
    typer.echo(f"submitted job {job_id} to {address}", err=True)
    if follow:
        async def tail() -> None:
            async for lines in client.tail_job_logs(job_id):
                typer.echo(lines, nl=False)

        asyncio.run(tail())
        typer.echo(f"job {job_id}: {client.get_job_status(job_id)}", err=True)
    return job_id
