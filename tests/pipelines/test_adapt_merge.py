"""`adapt` with `merge.method`: a tiny expansion, LAPT, then ElChat's merge back into the source chat model; the
checkpoint kept in the output folder and handed to the registry is the merged one.

LAPT is a stand-in here (every weight moved by seeded noise, in process): the real one through Ray Train is
test_adapt_e2e.py's, and with it this test took 366 s at load 10 to 14 (37 s of CPU) against a few seconds."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tests.pipelines.tiny_world import build_source_model, tiny_config_overrides

pytestmark = pytest.mark.timeout(900)


def _tensors(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return {name: tensor for shard in sorted(folder.glob("*.safetensors")) for name, tensor in load_file(shard).items()}


def _stand_in_lapt(recipe, model_dir, workdir, run_id):
    """What ``continue_pretraining`` returns, for a model whose every weight moved (seeded)."""
    config, held_out = recipe.config, recipe.held_out
    from vocadapt.pipelines.vocabulary_steps import held_out_bits_per_byte
    from vocadapt.platform.model_loading import load_model

    model, tokenizer = load_model(Path(model_dir), what="initialised model")
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    out = Path(workdir) / "lapt" / "model"
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return {"model_dir": out, "steps": 2, "energy": None,
            "bits_per_byte": held_out_bits_per_byte(model, tokenizer, held_out, config)}


def test_adapt_merges_into_the_chat_model_and_registers_the_merged_checkpoint(tmp_path, fixture_corpora, monkeypatch):
    from rich.console import Console

    from vocadapt.pipelines.adapt import run_adapt
    from vocadapt.platform.registry import model_versions as registry
    from vocadapt.platform.config import load_config
    from vocadapt.platform.tracking import Tracker

    corpora = {key: Path(path) for key, path in fixture_corpora.items()}
    source = build_source_model(tmp_path / "source", [corpora["en.train"]])
    overrides = tiny_config_overrides(source, corpora, tmp_path, **{
        "init.methods": "[fvt]", "init.mode": "expand", "tokenizer.expand_top_k": "40",
        "tokenizer.protect_lexicon": "null", "evaluation.side_by_side_items": "2",
        "tracking.tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}", "tracking.energy": "false",
        # layer 0 wholly the chat model's, linear: an exact check; layer 1 (of 2) is left to the adapted model
        "merge.method": "elchat-linear", "merge.rates": "{0: 1.0}",
    })
    monkeypatch.setattr("vocadapt.pipelines.adapt.continue_pretraining", _stand_in_lapt)
    registered = []
    monkeypatch.setattr(registry, "register_model", lambda tracker, run_id, model_dir, name, **_: registered.append(
        Path(model_dir)) or SimpleNamespace(name=name, version=1))
    result = run_adapt(load_config(None, overrides), Console(quiet=True))

    out = result.best.model_dir
    assert out.name == "merged" and out.is_relative_to(result.output_dir)
    assert registered and registered[0].name == "merged"  # handed over from the staging folder, then moved
    merged, chat = _tensors(out), _tensors(source)
    record = json.loads((out / "vocadapt_merge.json").read_text())
    assert record["method"] == "elchat-linear" and record["rates"] == {"0": 1.0}
    for name in [n for n in chat if n.startswith("model.layers.0.")] + ["model.norm.weight"]:
        assert torch.equal(merged[name], chat[name]), name
    moved = [n for n in chat if n.startswith("model.layers.1.") and not torch.equal(merged[n], chat[n])]
    assert moved, "LAPT moved the unmerged layer: it stays the adapted model's"
    specials = [0, 1, 2]
    embedding = "model.embed_tokens.weight"
    assert merged[embedding].shape[0] > chat[embedding].shape[0]
    assert torch.equal(merged[embedding][specials], chat[embedding][specials])
    # only the merged model is kept; its numbers replace after-LAPT's, the adapted model's stay as before_merge
    assert not [p for p in out.parent.iterdir() if p.name != "merged" and (p / "config.json").exists()]
    bpb = result.best.bits_per_byte
    assert {"target_before_merge", "source_before_merge", "target_after_lapt"} <= set(bpb)
    tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}", "tiny-e2e")
    child = tracker.client.get_run(result.best.run_id)
    assert child.data.metrics["bpb_target_after_lapt"] == pytest.approx(bpb["target_after_lapt"])
    assert child.data.metrics["bpb_target_before_merge"] == pytest.approx(bpb["target_before_merge"])
    assert child.data.tags["vocadapt.merge"] == "elchat-linear"
    parent = tracker.client.get_run(result.parent_run_id)
    assert parent.data.params["merge.method"] == "elchat-linear"
    assert "merge.json" in {a.path for a in tracker.client.list_artifacts(result.best.run_id)}
