"""A real S3 endpoint on 127.0.0.1 (moto's server mode, as Ray's own storage tests use), for tests that go through
pyarrow's S3 filesystem. The standard AWS variables point at it while it runs; the keys are moto's dummy ones."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from tests.mlflow_server import free_port

S3_ENV = {"AWS_ACCESS_KEY_ID": "vocadapt-test-key", "AWS_SECRET_ACCESS_KEY": "vocadapt-test-secret",
          "AWS_DEFAULT_REGION": "us-east-1"}


@contextmanager
def s3_server(folder: Path, buckets: tuple[str, ...] = ("vocadapt",)):
    """Yields the endpoint URL with ``buckets`` created; sets ``AWS_ENDPOINT_URL`` and the keys in this process's
    environment (inherited by what it starts: Ray nodes, workers) and restores them afterwards."""
    port = free_port()
    moto = Path(sys.executable).with_name("moto_server")
    log = open(folder / "moto-server.log", "wb")
    process = subprocess.Popen([str(moto), "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    saved = {name: os.environ.get(name) for name in (*S3_ENV, "AWS_ENDPOINT_URL")}
    try:
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2):
                    break
            except OSError:
                if process.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"moto_server did not start: {(folder / 'moto-server.log').read_text()[-2000:]}")
                time.sleep(0.3)
        os.environ.update({**S3_ENV, "AWS_ENDPOINT_URL": endpoint})
        import boto3

        client = boto3.client("s3", endpoint_url=endpoint)
        for bucket in buckets:
            client.create_bucket(Bucket=bucket)
        yield endpoint
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def object_keys(endpoint: str, bucket: str, prefix: str = "") -> list[str]:
    """Every object key under ``prefix`` in ``bucket``, read with boto3 (not through the code under test); the empty
    markers pyarrow writes for folders (keys ending in '/') are left out."""
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint)
    keys: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [item["Key"] for item in page.get("Contents", []) if not item["Key"].endswith("/")]
    return keys
