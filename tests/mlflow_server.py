"""A real ``mlflow server`` on 127.0.0.1, started by ``infra/mlflow-server/start.sh`` as it is deployed, for tests
that go over HTTP: a SQLite backend in the test's folder, artifacts proxied by the server."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path

from tests.local_server import free_port, local_server
from tests.mlflow_store_seed import seed_file

START_SCRIPT = Path(__file__).resolve().parents[1] / "infra" / "mlflow-server" / "start.sh"


def server_environment(folder: Path, port: int, *, auth: bool, artifacts: str | None = None) -> dict[str, str]:
    """The variables start.sh reads, for a one-worker server on 127.0.0.1 that keeps its databases in ``folder``.

    MLflow's job runner is off: by default the server starts a job runner and several huey consumer processes (for
    GenAI judges and trace roll-ups, which vocadapt never uses), each importing mlflow again; under py-spy they took
    about 210 CPU-s of the twin adapt test's module setup on 2 cores, a fifth of its CPU."""
    return {
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        "MLFLOW_SERVER_HOME": str(folder), "MLFLOW_SERVER_HOST": "127.0.0.1", "MLFLOW_SERVER_PORT": str(port),
        "MLFLOW_SERVER_WORKERS": "1", "MLFLOW_BACKEND_STORE_URI": f"sqlite:///{folder / 'server.db'}",
        "MLFLOW_ARTIFACTS_DESTINATION": artifacts or str(folder / "server-artifacts"),
        "MLFLOW_BIN": str(Path(sys.executable).with_name("mlflow")), "MLFLOW_SERVER_AUTH": "basic" if auth else "none",
    }


@contextmanager
def mlflow_server(folder: Path, *, auth: bool = False, artifacts: str | None = None, extra_args: tuple[str, ...] = (),
                  env: dict[str, str] | None = None):
    """Yields the server's URL; stops it afterwards.

    auth: basic authentication (``env`` gives ``MLFLOW_FLASK_SERVER_SECRET_KEY`` and ``MLFLOW_AUTH_ADMIN_PASSWORD``,
    or its own ``MLFLOW_AUTH_CONFIG_PATH``); ``extra_args`` naming ``--app-name basic-auth`` asks for it too.
    artifacts: where the server puts artifacts (default ``folder/server-artifacts``; an ``s3://`` URI with
    ``MLFLOW_S3_ENDPOINT_URL`` and the AWS keys in ``env`` or this process's environment for a bucket).
    """
    arguments = list(extra_args)
    if "--app-name" in arguments and arguments[arguments.index("--app-name") + 1] == "basic-auth":
        auth = True
        del arguments[arguments.index("--app-name"):arguments.index("--app-name") + 2]
    port = free_port()
    environment = {**os.environ, **server_environment(folder, port, auth=auth, artifacts=artifacts), **(env or {})}
    url = f"http://127.0.0.1:{port}"
    if environment["MLFLOW_BACKEND_STORE_URI"] == f"sqlite:///{folder / 'server.db'}":
        seed_file(folder / "server.db")  # a migrated empty store: the server skips MLflow's migrations
    with local_server(["bash", str(START_SCRIPT), *arguments], f"{url}/health", folder / "mlflow-server.log",
                      what="mlflow server", env=environment):
        yield url
