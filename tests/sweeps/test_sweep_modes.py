"""A sweep over the vocabulary modes of a two-language run: ``init.mode`` trim against expand, each trial the real
adapt pipeline (tiny model, Italian and Hindi fixture corpora, LAPT on Ray Train inside Tune trials), the best
registered after the serve check, then judged by the per-language gates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.pipelines.tiny_world import build_source_model, tiny_config_overrides
from tests.sweeps.test_sweep_adapt import ray_cluster  # noqa: F401  (its own in-process cluster, module-scoped)
from vocadapt.platform.config import apply_override

pytestmark = pytest.mark.timeout(900)


def test_a_sweep_of_trim_against_expand_over_two_languages_registers_a_checked_model(
    ray_cluster, tmp_path, fixture_corpora, monkeypatch,
):
    import mlflow
    from safetensors import safe_open

    from vocadapt.pipelines.sweep import run_sweep
    from vocadapt.platform.registry.mlflow_model import checkpoint_dir, download_model
    from vocadapt.platform.registry.model_versions import promote
    from vocadapt.platform.sweeps.tune import SweepConfig

    monkeypatch.chdir(tmp_path)
    corpora = {key: Path(path) for key, path in fixture_corpora.items()}
    model = build_source_model(tmp_path / "source", [corpora["en.train"]])
    source_rows = json.loads((model / "config.json").read_text())["vocab_size"]
    base: dict = {}
    overrides = [o for o in tiny_config_overrides(model, corpora, tmp_path, **{
        "tracking.tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}", "tracking.experiment": "mode-sweep",
        "init.methods": "[fvt]", "tokenizer.expand_top_k": "120", "tokenizer.trim_size": "300",
        "tokenizer.protect_lexicon": "null", "evaluation.side_by_side_items": "0"})
        if not o.startswith("target.language=")]
    for assignment in overrides + [
            "target.languages=[it, hi]", f"corpus.languages.hi.train=[{corpora['hi.train']}]",
            f"corpus.languages.hi.validation=[{corpora['hi.validation']}]"]:
        apply_override(base, assignment)
    sweep = SweepConfig.model_validate({
        "name": "mode-sweep", "base": base, "search_space": {"init.mode": {"grid": ["trim", "expand"]}},
        "scheduler": {"kind": "fifo", "max_t": 2}, "budget": {"max_concurrent_trials": 1},
        "storage_path": str(tmp_path / "ray"), "registered_model": "tiny-mode-sweep",
    })
    result = run_sweep(sweep)
    assert [row["status"] for row in result.rows] == ["FINISHED", "FINISHED"], result.rows

    client = mlflow.tracking.MlflowClient(result.tracking_uri, registry_uri=result.tracking_uri)
    rows = {}
    for row in result.rows:
        method_run = client.get_run(row["model_run_id"])
        assert method_run.data.params["mode"] == row["params"]["init.mode"]
        metrics = method_run.data.metrics
        # every language measured in every mode: held-out bits per byte before and after LAPT
        for stream in ("target", "target_hi", "source"):
            assert f"bpb_{stream}_zero_shot" in metrics and f"bpb_{stream}_after_lapt" in metrics, stream
        rows[row["params"]["init.mode"]] = metrics["parameters.vocabulary_rows"]
    # trim keeps the rows the two languages (and English) use, expand adds rows for both
    assert rows["trim"] < source_rows < rows["expand"], (rows, source_rows)

    name, version = result.registered
    model_version = client.get_model_version(name, str(version))
    tags = model_version.tags
    assert tags["vocadapt.target_languages"] == "it,hi"
    assert tags["vocadapt.serve_check"]  # the serve check ran before registration
    folder = Path(client.download_artifacts(model_version.run_id, "serve_check.json", str(tmp_path / "check")))
    assert json.loads(folder.read_text())["findings"]
    decision = promote(client, name, version)
    gates = {gate.gate for gate in decision.gates}
    assert any("hi" in gate for gate in gates), gates  # the second language is judged too
    local = checkpoint_dir(download_model(model_version.source, tmp_path / "registered", result.tracking_uri))
    with safe_open(str(next(local.glob("*.safetensors"))), framework="pt") as weights:
        rows_registered = weights.get_slice("model.embed_tokens.weight").get_shape()[0]
    assert rows_registered == rows[result.best["params"]["init.mode"]]
