"""A server process on 127.0.0.1 for a test: started, waited for until its URL answers, stopped afterwards. The real
MLflow server (``tests/mlflow_server.py``) and the real S3 endpoint (``tests/s3_server.py``) start this way."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def log_tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a process's log, for a test's failure message."""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@contextmanager
def local_server(command: list[str], ready_url: str, log_file: Path, *, what: str, timeout: float = 120,
                 env: dict[str, str] | None = None):
    """Runs ``command`` (its output in ``log_file``) until ``ready_url`` answers 200, yields, then stops it
    (terminate, then kill after 20 s). A process that exits or does not answer within ``timeout`` seconds fails the
    test with the end of its log."""
    log = open(log_file, "wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.time() + timeout
        while True:
            try:
                with urllib.request.urlopen(ready_url, timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"{what} did not start: {log_file.read_text(errors='replace')[-2000:]}")
            time.sleep(0.3)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
