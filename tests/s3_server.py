"""A real S3 endpoint on 127.0.0.1 (moto's server mode, as Ray's own storage tests use), for tests that go through
pyarrow's S3 filesystem. The standard AWS variables point at it while it runs; the keys are moto's dummy ones."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path

from tests.local_server import free_port, local_server

S3_ENV = {"AWS_ACCESS_KEY_ID": "vocadapt-test-key", "AWS_SECRET_ACCESS_KEY": "vocadapt-test-secret",
          "AWS_DEFAULT_REGION": "us-east-1"}


@contextmanager
def s3_server(folder: Path, buckets: tuple[str, ...] = ("vocadapt",)):
    """Yields the endpoint URL with ``buckets`` created; sets ``AWS_ENDPOINT_URL`` and the keys in this process's
    environment (inherited by what it starts: Ray nodes, workers) and restores them afterwards."""
    port = free_port()
    moto = Path(sys.executable).with_name("moto_server")
    endpoint = f"http://127.0.0.1:{port}"
    saved = {name: os.environ.get(name) for name in (*S3_ENV, "AWS_ENDPOINT_URL")}
    try:
        with local_server([str(moto), "-H", "127.0.0.1", "-p", str(port)], f"{endpoint}/moto-api/",
                          folder / "moto-server.log", what="moto_server", timeout=60):
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


def object_keys(endpoint: str, bucket: str, prefix: str = "") -> list[str]:
    """Every object key under ``prefix`` in ``bucket``, read with boto3 (not through the code under test); the empty
    markers pyarrow writes for folders (keys ending in '/') are left out."""
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint)
    keys: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [item["Key"] for item in page.get("Contents", []) if not item["Key"].endswith("/")]
    return keys
