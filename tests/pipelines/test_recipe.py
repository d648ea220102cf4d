"""The recipe ``adapt`` and ``leaderboard`` share: a method initialised without LAPT or merge is scored in memory,
and its side-by-side scores are those of the checkpoint written for the registry, read back."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.pipelines.tiny_world import build_source_model, out_of_domain_overrides, tiny_config_overrides

pytestmark = pytest.mark.timeout(600)


def test_a_method_scored_in_memory_scores_as_its_checkpoint_read_back(tmp_path, fixture_corpora):
    from rich.console import Console

    from vocadapt.components.tokenizers.overlap import new_token_ids
    from vocadapt.pipelines.adapt import run_adapt
    from vocadapt.pipelines.side_by_side import SourceVocabulary, items_for_config, score_model
    from vocadapt.platform.assets.sources import resolve_inputs
    from vocadapt.platform.config import load_config
    from vocadapt.platform.model_loading import load_model, load_source_tokenizer

    corpora = {key: Path(path) for key, path in fixture_corpora.items()}
    source = build_source_model(tmp_path / "source", [corpora["en.train"]])
    config = load_config(None, tiny_config_overrides(source, corpora, tmp_path, **{
        "init.methods": "[fvt]", "lapt.enabled": "false", "evaluation.side_by_side_items": "2",
        "tracking.tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}", "tracking.energy": "false",
        "tracking.register_best": "false", **out_of_domain_overrides(tmp_path),  # bits per byte: a continuous score
    }))
    result = run_adapt(config, Console(quiet=True))

    best = result.best
    assert best.model_dir.name == "initialised" and best.model_dir.is_relative_to(result.output_dir)
    model, tokenizer = load_model(best.model_dir)
    source_tokenizer = load_source_tokenizer(config, str(source))
    parts: dict = {}
    read_back = score_model(model, tokenizer, items_for_config(config, resolve_inputs(config)),
                            source=SourceVocabulary(source_tokenizer, new_token_ids(source_tokenizer, tokenizer)),
                            item_parts=parts)
    in_memory = {key: value for key, value in best.side_by_side.items()
                 if not key.startswith("generation.equal_content")}  # timings
    assert "bpb_ood_target" in read_back and in_memory == read_back
    assert set(best.gate_items) == set(parts)
