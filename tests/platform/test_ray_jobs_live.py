"""`vocadapt submit` against a real Ray head's job server on 127.0.0.1: submit, follow, status, stop, failures.

The head is started here (``ray start --head --block`` in its own process group, one CPU, free ports, its own temp
folder) and ended by killing that group: ``ray stop`` would end every Ray instance on the machine, others' too.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.local_server import log_tail
from vocadapt.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def job_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("head")
    problems = []
    for attempt in range(3):  # a port handed out by _free_port can be taken by another process before Ray binds it
        head, dashboard, temp, log_path = _start_head(folder, attempt)
        address = f"http://127.0.0.1:{dashboard}"
        try:
            problem = _wait_for_jobs(address, head)
            if problem is None:
                break
            problems.append(f"attempt {attempt + 1}: {problem}\n{log_tail(log_path)}")
        except BaseException:
            _stop_head(head, temp)
            raise
        _stop_head(head, temp)
    else:
        pytest.fail("no Ray job server came up:\n" + "\n\n".join(problems))
    try:
        yield address
    finally:
        _stop_head(head, temp)


def _start_head(folder: Path, attempt: int) -> tuple[subprocess.Popen, int, Path, Path]:
    temp = Path("/tmp") / f"vr{os.getpid()}{attempt}"  # short: Ray's socket paths must fit in 107 bytes
    dashboard = _free_port()
    # Ray's memory monitor off: it reads the whole machine's memory and kills the head's workers for what other
    # processes use (tests/training/test_multinode.py)
    # (the venv's bin first on PATH: tests/conftest.py)
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_memory_monitor_refresh_ms": "0"}
    env.pop("RAY_ADDRESS", None)
    log_path = folder / f"head{attempt}.log"
    with open(log_path, "w") as log:
        # the ports this test reaches named, and the Ray client server's too: its default, 10001, is every other
        # head's default on the machine (the rest Ray picks itself)
        head = subprocess.Popen(
            [str(BIN / "ray"), "start", "--head", "--block", "--node-ip-address", "127.0.0.1",
             "--port", str(_free_port()), "--ray-client-server-port", str(_free_port()),
             "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dashboard), "--include-dashboard", "true",
             "--dashboard-agent-listen-port", str(_free_port()), "--num-cpus", "1", "--temp-dir", str(temp),
             "--disable-usage-stats"],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return head, dashboard, temp, log_path


def _stop_head(head: subprocess.Popen, temp: Path) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(head.pid, sig)  # the head and everything it started share its process group
        except ProcessLookupError:
            break
        time.sleep(2)
    head.wait()
    shutil.rmtree(temp, ignore_errors=True)


def _wait_for_jobs(address: str, head: subprocess.Popen) -> str | None:
    """None once the job server answers; otherwise what went wrong (the head exited, or 60 s passed)."""
    from vocadapt.platform.jobs import job_client

    deadline, problem = time.time() + 60, None
    while time.time() < deadline:
        if head.poll() is not None:
            return f"ray start --head exited with {head.returncode}"
        try:
            job_client(address).list_jobs()
            return None
        except Exception as error:
            problem = error
            time.sleep(1)
    return f"no job server at {address} after 60 s: {problem}"


def _submit(address: str, *args: str):
    return CliRunner().invoke(app, ["submit", "--address", address, "--no-install", "--working-dir", str(ROOT), *args])


def test_a_vocadapt_command_runs_as_a_job_and_its_logs_and_status_come_back(job_server):
    # the value is built here, not written out: a stack trace printed into the output (Python's "--- Logging
    # error ---" when a library's log handler still holds an earlier CliRunner's closed stderr) shows source lines,
    # and must not be mistaken for the command printing the value
    probe = "-".join(("hello", "from", "the", "job"))
    result = _submit(job_server, "--env", f"VOCADAPT_PROBE={probe}", "--", "config", "configs/italian-smollm2.yaml")
    assert result.exit_code == 0, result.output
    job_id = result.stdout.strip().splitlines()[-1]
    assert "italian" in result.stdout.lower()  # the resolved config, streamed from the job's log
    assert probe not in result.output  # env values are never printed, only names
    assert "VOCADAPT_PROBE" in result.output
    status = CliRunner().invoke(app, ["submit", "--address", job_server, "--status", job_id])
    assert status.exit_code == 0 and status.stdout.strip() == "SUCCEEDED"


def test_a_long_job_can_be_stopped(job_server):
    from vocadapt.platform.jobs import job_client

    # a job that runs long: sleep in the job's shell (the stop ends the whole process group of the entrypoint)
    client = job_client(job_server)
    job_id = client.submit_job(entrypoint="sleep 600", runtime_env={})
    _wait_until(client, job_id, {"RUNNING"})
    stopped = CliRunner().invoke(app, ["submit", "--address", job_server, "--stop", job_id])
    assert stopped.exit_code == 0, stopped.output
    assert _wait_until(client, job_id, {"STOPPED"}) == "STOPPED"
    logs = CliRunner().invoke(app, ["submit", "--address", job_server, "--logs", job_id])
    assert logs.exit_code == 1 and "STOPPED" in logs.output


def test_a_failing_job_exits_non_zero_with_its_last_lines(job_server):
    result = _submit(job_server, "--", "config", "no-such-config.yaml")  # `config` reads it on the cluster only
    assert result.exit_code == 1, result.output
    assert "FAILED" in result.output and "no-such-config.yaml" in result.output


def test_caller_mistakes_exit_2_before_anything_is_uploaded(job_server):
    unknown = _submit(job_server, "--", "no-such-command")
    assert unknown.exit_code == 2 and "not a vocadapt command" in unknown.output
    no_config = _submit(job_server, "--", "lapt", "no-such-config.yaml")
    assert no_config.exit_code == 2 and "not in --working-dir" in no_config.output
    missing = CliRunner().invoke(app, ["submit", "--address", job_server, "--status", "raysubmit_nope"])
    assert missing.exit_code == 2 and "no job" in missing.output
    nobody = CliRunner().invoke(app, ["submit", "--address", f"http://127.0.0.1:{_free_port()}", "--", "config"])
    assert nobody.exit_code == 2 and "ray start --head" in nobody.output


def _wait_until(client, job_id: str, wanted: set[str], timeout: float = 60) -> str:
    deadline = time.time() + timeout
    while time.time() < deadline:
        current = client.get_job_status(job_id).value
        if current in wanted:
            return current
        time.sleep(0.5)
    return current
