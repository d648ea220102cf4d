"""``vocadapt submit``: run any vocadapt command as a job on a Ray cluster, following its logs to the end.

``vocadapt submit --status ID``, ``--logs ID`` and ``--stop ID`` read or stop a job submitted earlier.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from vocadapt.cli.errors import user_errors
from vocadapt.components.errors import UserError
from vocadapt.platform.jobs import EXCLUDES, job_spec  # noqa: F401  (re-exported: what a job runs is defined there)


def pinned_requirements(pyproject: Path) -> list[str]:
    """The exact pins of ``pyproject.toml``'s dependencies (what the cluster's job environment installs)."""
    import tomllib

    if not pyproject.is_file():
        raise UserError(f"{pyproject} not found; run `vocadapt submit` from the repository root or pass --working-dir")
    return list(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"])


def job_env(names: list[str]) -> dict[str, str]:
    """``--env NAME=VALUE`` or ``--env NAME`` (the value of NAME here) as the job's environment variables."""
    import os

    env = {}
    for item in names:
        name, given, value = item.partition("=")
        if not given and name not in os.environ:
            raise UserError(f"--env {name}: {name} is not set here; give --env {name}=VALUE or export it first")
        env[name] = value if given else os.environ[name]
    return env


def check_command(command: list[str]) -> None:
    """The first word must be a vocadapt command, before anything is uploaded."""
    from vocadapt.cli.app import app

    known = sorted(c.name for c in app.registered_commands if c.name)
    if command and command[0] not in known:
        raise UserError(f"{command[0]!r} is not a vocadapt command; the job runs `vocadapt <command> ...` with "
                        f"<command> one of: {', '.join(known)} (e.g. `vocadapt submit -- lapt configs/x.yaml`)")


# Commands whose first argument is an experiment config and which take --set overrides: checked here against the
# schema (a typo in a field fails in seconds here, not after the upload and the cluster's install)
CONFIG_COMMANDS = ("adapt", "lapt", "leaderboard")


def check_arguments(command: list[str], working_dir: Path) -> None:
    """The command's own parser accepts its arguments, and a config it names (relative to ``working_dir``, as the
    job will read it) validates, with its ``--set`` overrides: the caller's mistakes found before any upload."""
    from typer.exceptions import TyperException
    from typer.main import get_command

    from vocadapt.cli.app import app

    if not command:
        return
    group = get_command(app)
    with group.context_class(group) as parent:
        try:
            context = group.get_command(parent, command[0]).make_context(command[0], list(command[1:]),
                                                                         parent=parent)
        except typer.Exit:
            return  # --help: nothing to check
        except TyperException as error:  # typer's click: a usage error (unknown option, missing argument, ...)
            message = error.format_message() if hasattr(error, "format_message") else str(error)
            raise UserError(f"`vocadapt {' '.join(command)}` would fail on the cluster: {message}; fix the "
                            f"arguments after `--` (`vocadapt {command[0]} --help` lists them)") from error
    config = context.params.get("config_path") or context.params.get("config_option")
    if command[0] in CONFIG_COMMANDS and config is not None:
        from vocadapt.platform.config import load_config

        path = config if Path(config).is_absolute() else working_dir / config
        if not Path(path).is_file():
            raise UserError(f"config {config} is not in --working-dir {working_dir}: the job reads it from there; "
                            "give a path inside the uploaded folder")
        load_config(path, context.params.get("set_") or ())


def register(app: typer.Typer) -> None:
    @app.command("submit", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def submit_command(
        context: typer.Context,
        address: str = typer.Option("http://127.0.0.1:8265", "--address", envvar="RAY_ADDRESS",
                                    help="Ray dashboard/job server address of the cluster."),
        working_dir: Path = typer.Option(Path("."), "--working-dir", help="Repository root uploaded as the job's "
                                         "working directory."),
        install: bool = typer.Option(True, "--install/--no-install", help="Install the pinned requirements in the "
                                     "job's environment (off when the cluster's Python already has them)."),
        env: list[str] = typer.Option([], "--env", help="NAME=VALUE or NAME (its value here) for the job; repeat. "
                                      "Only names are printed."),
        follow: bool = typer.Option(True, "--follow/--no-follow", help="Stream the job's logs until it ends."),
        status_of: Optional[str] = typer.Option(None, "--status", help="Print the status of job ID and exit."),
        logs_of: Optional[str] = typer.Option(None, "--logs", help="Print (with --follow: follow) job ID's logs."),
        stop_id: Optional[str] = typer.Option(None, "--stop", help="Stop job ID."),
    ) -> None:
        """Submit a vocadapt command as a Ray job: `vocadapt submit -- lapt configs/x.yaml --set lapt.num_workers=8`.

        Exit codes: 0 when the job succeeded (or was submitted, with --no-follow), 1 when it failed or was stopped
        (its last log lines are printed), 2 for a mistake of the caller (no job server, unknown command or job)."""
        from vocadapt.platform import jobs

        with user_errors():
            if status_of or logs_of or stop_id:
                return _manage(jobs.job_client(address), status_of, logs_of, stop_id, follow)
            # the caller's own mistakes first, before the cluster is contacted or anything uploaded
            command = list(context.args)
            check_command(command)
            check_arguments(command, working_dir)
            job_environment = job_env(env)
            requirements = pinned_requirements(working_dir / "pyproject.toml") if install else None
            client = jobs.job_client(address)
            spec = jobs.job_spec(command, working_dir=working_dir.resolve(), env=job_environment,
                                 requirements=requirements)
            job_id = jobs.submit(client, spec)
        names = ", ".join(sorted(spec["runtime_env"]["env_vars"])) or "none"
        typer.echo(f"submitted job {job_id} to {address} (env: {names}); follow it with "
                   f"`vocadapt submit --logs {job_id}`, stop it with `vocadapt submit --stop {job_id}`", err=True)
        if follow:
            _finish(client, job_id, _follow_or_stop(client, job_id))
        typer.echo(job_id)


def _manage(client, status_of: str | None, logs_of: str | None, stop_id: str | None, follow: bool) -> None:
    from vocadapt.platform import jobs

    if status_of:
        typer.echo(jobs.status(client, status_of))
    if stop_id:
        stopped = jobs.stop(client, stop_id)
        typer.echo(f"job {stop_id}: {'stopping' if stopped else 'already ended'} ({jobs.status(client, stop_id)})")
    if logs_of:
        if follow:
            _finish(client, logs_of, _follow_or_stop(client, logs_of))
        else:
            typer.echo(client.get_job_logs(logs_of), nl=False)


def _follow_or_stop(client, job_id: str) -> str:
    """Follow the job; Ctrl-C stops it (the job would otherwise run on without anyone watching)."""
    from vocadapt.platform import jobs

    try:
        return jobs.follow(client, job_id, lambda lines: typer.echo(lines, nl=False))
    except KeyboardInterrupt:
        jobs.stop(client, job_id)
        typer.echo(f"\ninterrupted: stopping job {job_id}", err=True)
        return "STOPPED"


def _finish(client, job_id: str, final: str) -> None:
    from vocadapt.platform import jobs

    if final == "SUCCEEDED":
        typer.echo(f"job {job_id}: SUCCEEDED", err=True)
        return
    typer.echo(jobs.failure_message(client, job_id), err=True)
    raise typer.Exit(code=1)
