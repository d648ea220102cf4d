"""``registry_client`` talks to the store it is given and leaves the process-wide MLflow URIs alone: a promotion
against one store must not redirect the next ``mlflow`` call of the same process (a dashboard, a sweep) to it."""

from __future__ import annotations

import mlflow

from vocadapt.platform.registry.model_versions import registry_client


def test_registry_client_leaves_the_process_wide_uris_alone(tmp_path):
    store = tmp_path / "mlflow.db"
    store.touch()
    other = f"sqlite:///{tmp_path / 'other.db'}"
    previous = mlflow.get_registry_uri(), mlflow.get_tracking_uri()
    mlflow.set_registry_uri(other)
    mlflow.set_tracking_uri(other)
    try:
        client = registry_client(f"sqlite:///{store}")
        assert client._registry_uri == f"sqlite:///{store}"
        assert (mlflow.get_registry_uri(), mlflow.get_tracking_uri()) == (other, other)
    finally:
        mlflow.set_registry_uri(previous[0])
        mlflow.set_tracking_uri(previous[1])
