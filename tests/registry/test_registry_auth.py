"""Registration, gated promotion and rollback against a real `mlflow server` with basic authentication."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.registry.tiny_registry_world import (
    GOOD_METRICS, basic_auth_server, build_tiny_model, credentials, lineage, log_adapted_runs,
)
from vocadapt.cli.app import app

ADMIN_PASSWORD = "a-test-admin-password-7d1f"
NAME = "vocadapt-it-tiny"
BAD_METRICS = {
    "parent": GOOD_METRICS["parent"],
    # worse than the source model on Italian: the target bits-per-byte gate must refuse it
    "child": {**GOOD_METRICS["child"], "bpb_target_after_lapt": 2.5, "bpb_ood_target": 2.5},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("auth-server")
    with basic_auth_server(folder, ADMIN_PASSWORD) as url:
        yield url


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="module")
def versions(server, model_dir, tmp_path_factory):
    """Versions 1 and 2 (good) and 3 (worse than the source), registered by the admin."""
    from vocadapt.platform.registry.model_versions import register_model
    from vocadapt.platform.tracking import Tracker

    with credentials("admin", ADMIN_PASSWORD):
        tracker = Tracker(server, "registry-tests")
        registered = []
        for metrics in (GOOD_METRICS, GOOD_METRICS, BAD_METRICS):
            copy = tmp_path_factory.mktemp("model-copy") / "model"
            shutil.copytree(model_dir, copy)
            _, child = log_adapted_runs(tracker, metrics)
            registered.append(register_model(tracker, child, copy, NAME, lineage=lineage()))
    return registered


def _cli(args, user=None, password=None):
    with credentials(user, password):
        return CliRunner().invoke(app, args, catch_exceptions=False)


def test_anonymous_client_can_neither_register_nor_move_an_alias(server, versions):
    import mlflow
    from mlflow.exceptions import MlflowException

    with credentials(None, None):
        client = mlflow.tracking.MlflowClient(server, registry_uri=server)
        with pytest.raises(MlflowException, match="401|Unauthorized|UNAUTHENTICATED"):
            client.create_registered_model("intruder-model")
        with pytest.raises(MlflowException, match="401|Unauthorized|UNAUTHENTICATED"):
            client.set_registered_model_alias(NAME, "champion", "1")
    result = _cli(["promote", NAME, "--version", "1", "--to", "champion", "--tracking-uri", server])
    assert result.exit_code == 2, result.output
    assert "MLFLOW_TRACKING_USERNAME" in result.output
    with credentials("admin", ADMIN_PASSWORD):
        assert "champion" not in (mlflow.tracking.MlflowClient(server).get_registered_model(NAME).aliases or {})


def test_registration_carries_lineage_manifest_and_model_card(server, versions, tmp_path):
    import mlflow

    from vocadapt.platform.registry.mlflow_model import checkpoint_dir
    from vocadapt.platform.registry.model_versions import REQUIRED_LINEAGE, verify_model_files

    with credentials("admin", ADMIN_PASSWORD):
        client = mlflow.tracking.MlflowClient(server, registry_uri=server)
        version = client.get_model_version(NAME, str(versions[0].version))
        for key in REQUIRED_LINEAGE:
            assert version.tags[key] == lineage()[key]
        assert version.tags["vocadapt.run_id"] == version.run_id
        card = mlflow.artifacts.load_text(f"runs:/{version.run_id}/model_card.md")
        assert f"# {NAME} version {versions[0].version}" in card and "bpb_target_after_lapt | 1.9000" in card
        local = mlflow.artifacts.download_artifacts(versions[0].model_uri, dst_path=str(tmp_path / "dl"))
    files = verify_model_files(checkpoint_dir(Path(local)), version.tags["vocadapt.manifest_sha256"])
    assert "model.safetensors" in files and "tokenizer.json" in files


def test_promotion_moves_the_alias_only_through_its_gates_and_rollback_goes_back(server, versions):
    import mlflow

    admin = ("admin", ADMIN_PASSWORD)
    first, second, bad = (str(v.version) for v in versions)
    for version in (first, second):
        result = _cli(["promote", NAME, "--version", version, "--to", "champion", "--tracking-uri", server], *admin)
        assert result.exit_code == 0, result.output
        assert "accepted" in result.output and "target bits per byte" in result.output

    refused = _cli(["promote", NAME, "--version", bad, "--to", "champion", "--tracking-uri", server], *admin)
    assert refused.exit_code == 1, refused.output
    assert "refused" in refused.output and "FAIL" in refused.output

    with credentials(*admin):
        client = mlflow.tracking.MlflowClient(server, registry_uri=server)
        assert client.get_model_version_by_alias(NAME, "champion").version == second
        tags = client.get_model_version(NAME, bad).tags
        assert tags["vocadapt.promotion.champion.decision"] == "refused"
        gates = {g["gate"]: g["passed"] for g in json.loads(tags["vocadapt.promotion.champion.gates"])}
        assert gates["target bits per byte"] is False and gates["target fertility"] is True
        assert client.get_model_version(NAME, second).tags["vocadapt.promotion.champion.decision"] == "accepted"

    back = _cli(["rollback", NAME, "--tracking-uri", server], *admin)
    assert back.exit_code == 0, back.output
    with credentials(*admin):
        assert client.get_model_version_by_alias(NAME, "champion").version == first
        assert json.loads(client.get_model_version(NAME, second).tags["vocadapt.rollback.champion"])["to"] == int(first)
    again = _cli(["rollback", NAME, "--tracking-uri", server], *admin)
    assert again.exit_code == 2 and "no previous champion" in again.output


def test_a_read_only_user_cannot_move_an_alias(server, versions):
    import mlflow
    from mlflow.exceptions import MlflowException
    from mlflow.server.auth.client import AuthServiceClient

    with credentials("admin", ADMIN_PASSWORD):
        AuthServiceClient(server).create_user("reader", "a-reader-password-91c2")
    with credentials("reader", "a-reader-password-91c2"):
        client = mlflow.tracking.MlflowClient(server, registry_uri=server)
        assert client.get_registered_model(NAME).name == NAME  # default permission: READ
        with pytest.raises(MlflowException, match="403|PERMISSION_DENIED|Permission"):
            client.set_registered_model_alias(NAME, "champion", str(versions[2].version))
