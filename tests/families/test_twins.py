"""Twins of every family: random weights in the real architecture class with the real tokenizer and vocabulary rows,
reduced depth, reduced or real width; and a local hub cache that resolves them offline by their real hub ids, on the
path `source.model: <hub id>` takes (`platform/model_loading.py::resolve_model_folder`).

A real-width twin is built in the test on the meta device only: writing one (Llama-3.1, one layer: 1.3 B parameters,
2.5 GB of bfloat16) took 90 s and 3.1 GB of memory on the 2-core machine, too much for CI."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.families.conftest import FAMILIES
from vocadapt.components.errors import UserError
from vocadapt.platform.families.catalogue import model_family
from vocadapt.platform.families.twins import (
    TWIN_NOTE, TwinShape, build_twin, install_twin_in_hub_cache, twin_config, twin_lineage, twin_record,
)

REDUCED_LAYERS = 2


@pytest.fixture(scope="session")
def reduced_twin(tmp_path_factory, family_tokenizers):
    """``reduced_twin(name)``: the reduced-width, two-layer twin of a family (seed 0, bfloat16), built once per
    session (``test_twin_adapt.py`` imports this fixture and adapts two of them)."""
    root = tmp_path_factory.mktemp("twins")
    built: dict[str, Path] = {}

    def twin(name: str) -> Path:
        if name not in built:
            built[name] = build_twin(name, root / name, TwinShape(REDUCED_LAYERS, "reduced"))
        return built[name]

    return twin


@pytest.fixture(scope="module")
def twins(reduced_twin) -> dict[str, Path]:
    return {name: reduced_twin(name) for name in FAMILIES}


def _shapes(folder: Path) -> dict[str, list[int]]:
    from safetensors import safe_open

    shapes = {}
    for shard in folder.glob("*.safetensors"):
        with safe_open(str(shard), framework="pt") as handle:
            shapes.update({key: handle.get_slice(key).get_shape() for key in handle.keys()})
    return shapes


@pytest.mark.parametrize("name", FAMILIES)
def test_reduced_twin_is_the_family_in_small(twins, family_tokenizers, load_family_tokenizer, name):
    family, folder = model_family(name), twins[name]
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == [family.architecture["class"]]
    assert config["num_hidden_layers"] == REDUCED_LAYERS and config["hidden_size"] == 64
    assert config["vocab_size"] == family.vocab_rows  # padded past the tokenizer where the family pads
    assert config["tie_word_embeddings"] == family.tied
    shapes = _shapes(folder)
    assert shapes["model.embed_tokens.weight"] == [family.vocab_rows, 64]
    assert ("lm_head.weight" in shapes) == (not family.tied)
    if not family.tied:
        assert shapes["lm_head.weight"] == [family.vocab_rows, 64]
    # the real tokenizer files, byte for byte (chat template and specials included), and nothing pickled
    for source in (path for path in family_tokenizers[name].iterdir() if path.is_file()):  # not llama2's reference/
        assert (folder / source.name).read_bytes() == source.read_bytes(), source.name
    assert not [path for path in folder.iterdir() if path.suffix in (".bin", ".pt", ".pth", ".pkl")]
    tokenizer = load_family_tokenizer(name)
    assert len(tokenizer) <= config["vocab_size"]
    for field in ("bos_token_id", "eos_token_id", "pad_token_id"):
        assert config.get(field) == getattr(tokenizer, field), field
    record = twin_record(folder)
    assert record["family"] == name and record["hub_id"] == family.hub_id and record["note"] == TWIN_NOTE
    assert record["real_num_hidden_layers"] == family.architecture["num_hidden_layers"]


def test_reduced_width_keeps_the_family_ratios():
    llama = twin_config("llama3_1", width="reduced")
    assert (llama.num_attention_heads // llama.num_key_value_heads) == 32 // 8  # grouped-query ratio
    assert llama.intermediate_size == 224  # 14336 / 4096 * 64
    gemma = twin_config("gemma3", width="reduced")
    assert gemma.head_dim == gemma.query_pre_attn_scalar == 16
    deepseek = twin_config("deepseek_v3", width="reduced", layers=2)
    assert deepseek.n_routed_experts == 4 and deepseek.first_k_dense_replace == 1  # layer 1 is a MoE layer
    with pytest.raises(UserError, match="width"):
        twin_config("llama2", width="half")


@pytest.mark.parametrize("name", FAMILIES)
def test_real_width_twin_on_the_meta_device(name):
    """The real width, as a model: every family's class at its hidden size, with its embedding rows; Llama-3.1's
    embedding and untied head are 128,256 x 4,096 each."""
    import torch
    from transformers import AutoModelForCausalLM

    family = model_family(name)
    config = twin_config(name, width="real", layers=1)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    assert type(model).__name__ == family.architecture["class"]
    hidden = family.architecture["hidden_size"]
    assert tuple(model.get_input_embeddings().weight.shape) == (family.vocab_rows, hidden)
    head = model.get_output_embeddings().weight
    assert tuple(head.shape) == (family.vocab_rows, hidden)
    assert (head is model.get_input_embeddings().weight) == family.tied
    if name == "llama3_1":
        assert tuple(head.shape) == (128256, 4096) and not family.tied
        assert model.config.intermediate_size == 14336 and model.config.num_key_value_heads == 8


def test_same_family_and_seed_give_the_same_bytes(tmp_path, family_tokenizers):
    def digest(folder: Path) -> str:
        return hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()

    reduced = TwinShape(width="reduced")
    first = build_twin("mistral_v1", tmp_path / "a", reduced)
    again = build_twin("mistral_v1", tmp_path / "b", reduced)
    other = build_twin("mistral_v1", tmp_path / "c", reduced, seed=1)
    assert digest(first) == digest(again) != digest(other)
    with pytest.raises(UserError, match="already holds a checkpoint"):
        build_twin("mistral_v1", first, reduced)


def test_twin_lineage_never_names_the_real_model_alone():
    tags = twin_lineage("meta-llama/Llama-3.1-8B", {"display": "Llama-3.1", "hub_id": "meta-llama/Llama-3.1-8B",
                                                   "num_hidden_layers": 2, "width": "reduced"})
    assert tags["vocadapt.source_model"] == f"meta-llama/Llama-3.1-8B (twin: {TWIN_NOTE})"
    assert tags["vocadapt.twin"].startswith("twin of Llama-3.1") and TWIN_NOTE in tags["vocadapt.twin"]
    assert twin_record(Path("/nonexistent")) is None


OFFLINE_PROBE = textwrap.dedent("""
    import json, sys
    from transformers import AutoModelForCausalLM

    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer
    from vocadapt.components.errors import UserError
    from vocadapt.platform.model_loading import check_model_folder, resolve_model_folder

    report = {}
    for hub_id in sys.argv[1:]:
        tokenizer = load_pretrained_tokenizer(hub_id)
        model = AutoModelForCausalLM.from_pretrained(hub_id)
        folder = resolve_model_folder(hub_id, what="source.model")
        refusal = None
        try:
            check_model_folder(folder, what="source.model")
        except UserError as error:
            refusal = str(error)
        report[hub_id] = {
            "class": type(model).__name__, "rows": model.get_input_embeddings().weight.shape[0],
            "config_ids": [model.config.bos_token_id, model.config.eos_token_id, model.config.pad_token_id],
            "tokenizer_ids": [tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id],
            "folder": folder, "refusal": refusal,
        }
    for hub_id in ("meta-llama/Llama-3.1-70B", "example/custom-code", "example/pickled"):
        try:
            check_model_folder(resolve_model_folder(hub_id, what="source.model"), what="source.model")
            report[hub_id] = "accepted"
        except UserError as error:
            report[hub_id] = str(error)
    print("REPORT" + json.dumps(report))
""")


def test_hub_ids_resolve_offline_from_the_cache(tmp_path, twins):
    """With HF_HUB_OFFLINE=1 and HF_HUB_CACHE set (in a fresh process: huggingface_hub reads both once, at import),
    transformers and vocadapt's own resolution load every twin by its real hub id; a twin laid out with pickled
    weights only, or with custom code, is still refused on the resolved folder; an id the cache lacks is a
    UserError naming the cache and the fix."""
    cache = tmp_path / "hub"
    hub_ids = {}
    for name in FAMILIES:
        hub_ids[name] = model_family(name).hub_id
        snapshot = install_twin_in_hub_cache(twins[name], hub_ids[name], cache)
        assert (cache / f"models--{hub_ids[name].replace('/', '--')}" / "refs" / "main").read_text() == snapshot.name
    # the same twin installs as the same commit
    assert install_twin_in_hub_cache(twins["llama2"], hub_ids["llama2"], cache).name == snapshot_name(cache, "llama2")
    custom = tmp_path / "custom"
    custom.mkdir()
    for path in twins["llama2"].iterdir():
        (custom / path.name).write_bytes(path.read_bytes())
    config = json.loads((custom / "config.json").read_text())
    (custom / "config.json").write_text(json.dumps({**config, "auto_map": {"AutoModelForCausalLM": "x.Model"}}))
    install_twin_in_hub_cache(custom, "example/custom-code", cache)
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    (pickled / "config.json").write_text(json.dumps(config))
    (pickled / "pytorch_model.bin").write_bytes(b"not loaded")
    install_twin_in_hub_cache(pickled, "example/pickled", cache)

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache)}
    env.pop("HF_HOME", None)
    done = subprocess.run([sys.executable, "-c", OFFLINE_PROBE, *hub_ids.values()], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.split("REPORT", 1)[1])
    for name, hub_id in hub_ids.items():
        loaded = report[hub_id]
        assert loaded["class"] == model_family(name).architecture["class"]
        assert loaded["rows"] == model_family(name).vocab_rows
        assert loaded["config_ids"] == loaded["tokenizer_ids"]
        assert Path(loaded["folder"]).parents[1].name == f"models--{hub_id.replace('/', '--')}"
        assert loaded["refusal"] is None
    missing = report["meta-llama/Llama-3.1-70B"]
    assert "is not in the hub cache" in missing and str(cache) in missing and "HF_HUB_OFFLINE" in missing
    assert "auto_map" in report["example/custom-code"]  # custom code, refused on the resolved snapshot
    assert "pytorch_model.bin" in report["example/pickled"] and "no *.safetensors" in report["example/pickled"]


def snapshot_name(cache: Path, name: str) -> str:
    hub_id = model_family(name).hub_id
    return (cache / f"models--{hub_id.replace('/', '--')}" / "refs" / "main").read_text()


def test_twin_command_writes_and_installs(tmp_path, family_tokenizers):
    from typer.testing import CliRunner

    from vocadapt.cli.app import app

    result = CliRunner().invoke(app, ["twin", "llama2", "--out", str(tmp_path / "twin"), "--width", "reduced",
                                      "--hub-cache", str(tmp_path / "hub")])
    assert result.exit_code == 0, result.output
    assert "random weights, not the real model" in result.output
    assert f"HF_HUB_OFFLINE=1 HF_HUB_CACHE={tmp_path / 'hub'}" in result.output
    assert snapshot_name(tmp_path / "hub", "llama2") in {p.name for p in
                                                        (tmp_path / "hub").glob("models--*/snapshots/*")}
    refused = CliRunner().invoke(app, ["twin", "llama9", "--out", str(tmp_path / "x")])
    assert refused.exit_code == 2 and "unknown model family" in refused.output
