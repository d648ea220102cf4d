"""Gates recorded at registration, against a real `mlflow server` over HTTP: `promote` without --gates uses the
version's recorded gates (a sweep records its `promotion:` section), else the defaults, and says which; --gates
overrides them."""

from __future__ import annotations

import shutil

import pytest
from typer.testing import CliRunner

from tests.registry.tiny_registry_world import GOOD_METRICS, build_tiny_model, credentials, lineage, log_adapted_runs
from vocadapt.cli.app import app
from vocadapt.platform.registry.model_versions import GATES_TAG, PromotionGates

NAME = "vocadapt-it-recorded-gates"
# English bits per byte 2.0 against the source model's 1.0: the default gate (25% relative, threshold 1.25) refuses
# it, a sweep's collapse-only gate (3.0 absolute, threshold 4.0) accepts it.
ENGLISH_GIVEN_UP = {"parent": GOOD_METRICS["parent"], "child": {**GOOD_METRICS["child"], "bpb_source_after_lapt": 2.0, "bpb_ood_source": 2.0}}
SWEEP_GATES = PromotionGates(source_bpb={"absolute": 3.0})


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from tests.mlflow_server import mlflow_server

    with credentials(None, None), mlflow_server(tmp_path_factory.mktemp("gates-server")) as url:
        yield url


@pytest.fixture(scope="module")
def versions(server, tmp_path_factory):
    """Version 1 registered with the sweep's gates, version 2 with none, version 3 with gates of a retired schema;
    all three with the same numbers."""
    from vocadapt.platform.registry.model_versions import VersionOptions, register_model
    from vocadapt.platform.tracking import Tracker

    tracker = Tracker(server, "recorded-gates")
    tiny_model = build_tiny_model(tmp_path_factory.mktemp("tiny-model"))
    registered = []
    for index, gates in enumerate((SWEEP_GATES, None, None)):
        model_dir = tmp_path_factory.mktemp(f"model-{index}") / "model"  # registration refuses what would not serve
        shutil.copytree(tiny_model, model_dir)
        _, child = log_adapted_runs(tracker, ENGLISH_GIVEN_UP)
        registered.append(register_model(tracker, child, model_dir, NAME, options=VersionOptions(gates=gates),
                                         lineage={**lineage(), "vocadapt.sweep.name": "tiny-sweep"}))
    tracker.client.set_model_version_tag(NAME, str(registered[2].version), GATES_TAG, '{"source_bpb_margin": 0.25}')
    return [str(v.version) for v in registered]


def _promote(server, version, *extra):
    with credentials(None, None):
        result = CliRunner().invoke(app, ["promote", NAME, "--version", version, "--to", "champion",
                                          "--tracking-uri", server, *extra], catch_exceptions=False)
    return result, " ".join(result.output.split())


def _client(server):
    import mlflow

    return mlflow.tracking.MlflowClient(server, registry_uri=server)


def test_the_recorded_gates_decide_without_gates_and_a_gates_file_overrides_them(server, versions, tmp_path):
    recorded, unrecorded, _ = versions
    assert PromotionGates.model_validate_json(_client(server).get_model_version(NAME, recorded).tags[GATES_TAG]) \
        == SWEEP_GATES

    # the same numbers without recorded gates: the defaults refuse, and the output says they were the defaults
    result, text = _promote(server, unrecorded)
    assert result.exit_code == 1, result.output
    assert f"gates: the defaults (PromotionGates): none recorded on version {unrecorded}" in text
    assert "25% rel" in text and "refused" in text

    # --gates overrides the recorded gates: the default English margin, from a file, refuses the recorded version
    strict = tmp_path / "strict.yaml"
    strict.write_text("promotion:\n  source_bpb: {relative: 0.25}\n", encoding="utf-8")
    result, text = _promote(server, recorded, "--gates", str(strict))
    assert result.exit_code == 1, result.output
    assert f"gates: {strict} (--gates)" in text and "25% rel" in text and "3 abs" not in text
    assert "champion" not in (_client(server).get_registered_model(NAME).aliases or {})

    # without --gates the recorded gates apply: English within 3 bits per byte of the source's, accepted
    result, text = _promote(server, recorded)
    assert result.exit_code == 0, result.output
    assert f"gates: recorded on version {recorded} by sweep tiny-sweep (tag {GATES_TAG})" in text
    assert "3 abs" in text and "25% rel" not in text and f"{NAME}@champion -> version {recorded}" in text
    client = _client(server)
    assert client.get_model_version_by_alias(NAME, "champion").version == recorded
    tags = client.get_model_version(NAME, recorded).tags
    assert tags["vocadapt.promotion.champion.decision"] == "accepted"
    assert tags["vocadapt.promotion.champion.gates_from"].startswith(f"recorded on version {recorded}")


def test_recorded_gates_that_no_longer_validate_stop_promote_and_point_at_gates(server, versions):
    _, _, retired = versions
    result, text = _promote(server, retired)
    assert result.exit_code == 2, result.output
    assert f"recorded on version {retired}" in text and "source_bpb_margin" in text and "--gates FILE" in text
    assert "decision" not in " ".join(_client(server).get_model_version(NAME, retired).tags)
