"""A real ``mlflow server`` on 127.0.0.1 with a SQLite backend, for tests that go over HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def mlflow_server(folder: Path, *, extra_args: tuple[str, ...] = (), env: dict[str, str] | None = None):
    """Yields the server's URL; stops it afterwards. Artifacts are proxied by the server into ``folder``."""
    port = free_port()
    mlflow = Path(sys.executable).with_name("mlflow")
    command = [
        str(mlflow), "server", "--host", "127.0.0.1", "--port", str(port),
        "--backend-store-uri", f"sqlite:///{folder / 'server.db'}",
        "--artifacts-destination", str(folder / "server-artifacts"), "--workers", "1", *extra_args,
    ]
    log = open(folder / "mlflow-server.log", "wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"mlflow server did not start: {(folder / 'mlflow-server.log').read_text()[-2000:]}")
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
