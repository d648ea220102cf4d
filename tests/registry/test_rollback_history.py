"""Alias history on a local registry: promotions append, rollbacks walk back one at a time, a hand-set alias counts
as a previous champion, promoting the current champion again adds nothing, and a refusal moves nothing."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.registry.tiny_registry_world import GOOD_METRICS, build_tiny_model, lineage, log_adapted_runs
from vocadapt.components.errors import UserError

NAME = "history-model"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture()
def registry(tmp_path, tiny_model):
    import mlflow

    from vocadapt.platform.registry.model_versions import register_model
    from vocadapt.platform.tracking import Tracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = Tracker(uri, "history", artifact_root=tmp_path / "artifacts")
    worse = {"parent": GOOD_METRICS["parent"], "child": {**GOOD_METRICS["child"], "bpb_source_after_lapt": 9.0, "bpb_ood_source": 9.0}}
    for index, metrics in enumerate([GOOD_METRICS] * 3 + [worse]):
        model_dir = tmp_path / f"model-{index}"  # a real checkpoint: registration refuses what would not serve
        shutil.copytree(tiny_model, model_dir)
        _, child = log_adapted_runs(tracker, metrics)
        register_model(tracker, child, model_dir, NAME, lineage=lineage())
    return mlflow.tracking.MlflowClient(uri, registry_uri=uri)


def test_rollback_walks_back_through_every_previous_champion(registry):
    from vocadapt.platform.registry.model_versions import alias_history, promote, rollback

    registry.set_registered_model_alias(NAME, "champion", "1")  # set by hand, before vocadapt managed it
    for version in (2, 3, 3):
        assert promote(registry, NAME, version).accepted
    assert alias_history(registry, NAME, "champion") == [1, 2, 3]

    refused = promote(registry, NAME, 4)
    assert not refused.accepted and refused.previous == 3
    assert int(registry.get_model_version_by_alias(NAME, "champion").version) == 3
    assert json.loads(registry.get_model_version(NAME, "4").tags["vocadapt.promotion.champion.gates"])

    assert rollback(registry, NAME) == (3, 2)
    assert rollback(registry, NAME) == (2, 1)
    assert int(registry.get_model_version_by_alias(NAME, "champion").version) == 1
    with pytest.raises(UserError, match="no previous champion"):
        rollback(registry, NAME)


def test_unknown_versions_and_missing_aliases_are_clear_errors(registry):
    from vocadapt.platform.registry.model_versions import promote, rollback

    with pytest.raises(UserError, match="has no version 99"):
        promote(registry, NAME, 99)
    with pytest.raises(UserError, match="no 'champion' alias"):
        rollback(registry, NAME)


def test_registration_refuses_missing_lineage(tmp_path):
    from vocadapt.platform.registry.model_versions import register_model

    with pytest.raises(UserError, match="vocadapt.corpus_sha256"):
        register_model(None, "run", tmp_path, NAME, lineage={k: v for k, v in lineage().items()
                                                            if k != "vocadapt.corpus_sha256"})
