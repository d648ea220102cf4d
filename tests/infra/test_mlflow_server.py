"""infra/mlflow-server/start.sh as deployed: basic authentication and an S3 artifact store (moto's S3 server on
loopback stands in for the bucket). Anonymous requests are refused; a signed-in user's artifacts land in the bucket
through the server, with no S3 keys on the client. Missing settings stop the script before a server starts."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import requests

from tests.mlflow_server import START_SCRIPT, free_port, mlflow_server, server_environment
from tests.s3_server import S3_ENV, object_keys, s3_server

pytestmark = pytest.mark.timeout(300)

BUCKET = "vocadapt-mlflow"
ADMIN_PASSWORD = "a-test-admin-password-9431"
SECRETS = {"MLFLOW_FLASK_SERVER_SECRET_KEY": "test-secret-key-not-for-production",
           "MLFLOW_AUTH_ADMIN_PASSWORD": ADMIN_PASSWORD}


def test_a_signed_in_user_logs_artifacts_into_the_bucket_and_anonymous_requests_are_refused(tmp_path, monkeypatch):
    import mlflow

    with s3_server(tmp_path, buckets=(BUCKET,)) as endpoint, mlflow_server(
            tmp_path, auth=True, artifacts=f"s3://{BUCKET}/artifacts",
            env={**SECRETS, "MLFLOW_S3_ENDPOINT_URL": endpoint}) as url:
        anonymous = requests.post(f"{url}/api/2.0/mlflow/experiments/create", json={"name": "anonymous"}, timeout=30)
        assert anonymous.status_code == 401, anonymous.text
        wrong = requests.post(f"{url}/api/2.0/mlflow/experiments/create", json={"name": "wrong"}, timeout=30,
                              auth=("admin", "not-the-password"))
        assert wrong.status_code == 401, wrong.text

        # the client knows the server and its MLflow user, nothing about S3
        for name in (*S3_ENV, "AWS_ENDPOINT_URL", "MLFLOW_S3_ENDPOINT_URL"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "admin")
        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", ADMIN_PASSWORD)
        client = mlflow.tracking.MlflowClient(url)
        experiment = client.create_experiment("deployed")
        run = client.create_run(experiment)
        (tmp_path / "note.txt").write_text("ciao", encoding="utf-8")
        client.log_artifact(run.info.run_id, str(tmp_path / "note.txt"), "notes")
        client.set_terminated(run.info.run_id)
        downloaded = client.download_artifacts(run.info.run_id, "notes/note.txt", str(tmp_path / "back"))
        assert Path(downloaded).read_text(encoding="utf-8") == "ciao"
        assert client.get_experiment(experiment).artifact_location.startswith("mlflow-artifacts:")
        monkeypatch.undo()  # the S3 keys again, to look in the bucket directly

        keys = object_keys(endpoint, BUCKET, "artifacts/")
        assert [key for key in keys if key.endswith(f"{run.info.run_id}/artifacts/notes/note.txt")], keys
        assert not (tmp_path / "server-artifacts").exists()


@pytest.mark.parametrize("missing, message", [
    ("MLFLOW_ARTIFACTS_DESTINATION", "MLFLOW_ARTIFACTS_DESTINATION is not set"),
    ("MLFLOW_FLASK_SERVER_SECRET_KEY", "MLFLOW_FLASK_SERVER_SECRET_KEY is not set"),
    ("MLFLOW_AUTH_ADMIN_PASSWORD", "MLFLOW_AUTH_ADMIN_PASSWORD is not set"),
])
def test_a_missing_setting_stops_the_script_naming_it(tmp_path, missing, message):
    env = {**os.environ, **server_environment(tmp_path, free_port(), auth=True), **SECRETS}
    env.pop(missing)
    run = subprocess.run(["bash", str(START_SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and message in run.stderr, run.stderr
    assert not (tmp_path / "server.db").exists()


def test_an_unknown_auth_mode_is_refused(tmp_path):
    env = {**os.environ, **server_environment(tmp_path, free_port(), auth=True), **SECRETS,
           "MLFLOW_SERVER_AUTH": "ldap"}
    run = subprocess.run(["bash", str(START_SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "MLFLOW_SERVER_AUTH=ldap is not known" in run.stderr, run.stderr
