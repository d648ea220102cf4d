"""Ray Jobs: submit a vocadapt command to a cluster's job server, follow its logs, read its status, stop it.

The job server is the Ray dashboard's (``ray start --head`` with ``ray[default]`` installed, port 8265 by default).
The job's working directory is the repository; its entrypoint installs that copy into a folder of the job's own
(``pip install --target``), never into the cluster's Python, and runs ``python -m vocadapt.cli.app``. Environment
variables reach the job through its runtime environment; only their names are ever printed.
"""

from __future__ import annotations

import asyncio
import os
import shlex
from collections.abc import Callable
from pathlib import Path

from vocadapt.components.errors import UserError

# What the job's working directory upload leaves out: caches, virtual environments, run outputs, stores, builds.
EXCLUDES = [".git", ".venv", "**/__pycache__", "runs", "mlruns", "mlartifacts", "*.db", "*.egg-info", ".pytest_cache",
            "build", "dist", ".hypothesis", ".whl"]
# The folder inside the job's working directory that holds its own install of the uploaded repository.
JOB_SITE = ".vocadapt-site"
TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}


def job_spec(command: list[str], *, working_dir: Path, requirements: list[str] | None = None,
             env: dict[str, str] | None = None) -> dict:
    """The entrypoint and runtime_env of a Ray job running ``vocadapt <command>`` from ``working_dir``."""
    if not command:
        raise UserError("nothing to submit: give the vocadapt command to run, e.g. `vocadapt submit -- lapt "
                        "configs/italian-smollm2.yaml`")
    runtime_env: dict = {"working_dir": str(working_dir), "excludes": EXCLUDES, "env_vars": dict(env or {})}
    if requirements:
        runtime_env["pip"] = requirements
    # `python` is the job's: the cluster's (or the runtime_env's virtualenv when requirements are installed). The
    # repository is installed without its dependencies into the job's own folder, so a cluster whose Python already
    # has a vocadapt (an editable install, an image) is left as it was and the uploaded code is what runs.
    entrypoint = (f"python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation "
                  f"--target {JOB_SITE} . && PYTHONPATH=$PWD/{JOB_SITE}${{PYTHONPATH:+:$PYTHONPATH}} "
                  "python -m vocadapt.cli.app " + " ".join(shlex.quote(part) for part in command))
    return {"entrypoint": entrypoint, "runtime_env": runtime_env}


def job_client(address: str):
    """A ``JobSubmissionClient`` for ``address``, or a UserError saying how to start a job server."""
    from ray.job_submission import JobSubmissionClient

    _use_token_when_available()
    try:
        return JobSubmissionClient(address)
    except Exception as error:  # ConnectionError, or a RuntimeError wrapping it, depending on where it failed
        raise UserError(
            f"no Ray job server at {address} ({str(error).splitlines()[0] if str(error) else type(error).__name__}); "
            "start one with `ray start --head --include-dashboard true` (needs ray[default]) or pass --address / "
            "RAY_ADDRESS with the dashboard's http address, e.g. http://HEAD:8265") from error


def _use_token_when_available() -> None:
    """Send Ray's auth token when this machine has one and the caller set no RAY_AUTH_MODE.

    Ray 2.59+ starts local clusters (``ray start --head`` too) with token authentication and keeps the token in
    ``~/.ray/auth_token``, but a job client only sends it when ``RAY_AUTH_MODE=token``: without this, a head started
    on this machine answers every request with 401."""
    if os.environ.get("RAY_AUTH_MODE"):
        return
    has_token = os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH") or \
        (Path.home() / ".ray" / "auth_token").is_file()
    if has_token:
        from ray._private.authentication.authentication_token_setup import _enable_token_auth

        _enable_token_auth()  # sets RAY_AUTH_MODE=token and refreshes Ray's cached config; never prints the token


def submit(client, spec: dict) -> str:
    return client.submit_job(entrypoint=spec["entrypoint"], runtime_env=spec["runtime_env"])


def status(client, job_id: str) -> str:
    """The job's status name (PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED); a UserError for an unknown id."""
    try:
        return str(client.get_job_status(job_id).value)
    except RuntimeError as error:
        raise UserError(f"no job {job_id!r} on this cluster ({error}); list jobs with `ray job list`") from error


def follow(client, job_id: str, echo: Callable[[str], None]) -> str:
    """Stream the job's logs to ``echo`` until it ends; returns its final status."""

    async def tail() -> None:
        async for lines in client.tail_job_logs(job_id):
            echo(lines)

    asyncio.run(tail())
    return status(client, job_id)


def stop(client, job_id: str) -> bool:
    """Ask the cluster to stop the job; False when it had already ended."""
    status(client, job_id)  # an unknown id is the user's error, not a silent False
    return bool(client.stop_job(job_id))


def last_lines(client, job_id: str, count: int = 20) -> list[str]:
    """The last ``count`` lines of the job's log (where a failed job says why)."""
    return client.get_job_logs(job_id).rstrip("\n").splitlines()[-count:]


def failure_message(client, job_id: str) -> str:
    """Why the job ended as it did: Ray's message (a failed runtime env, a non-zero entrypoint) and the log's end."""
    info = client.get_job_info(job_id)
    tail = "\n".join("  | " + line for line in last_lines(client, job_id))
    return f"job {job_id} {info.status.value}: {info.message or ''}\n{tail}".rstrip()
