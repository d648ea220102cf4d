"""Twins: random-weight checkpoints of a catalogue family, in its real shape, with its real tokenizer.

A twin is what a test (or a dry run on a laptop) adapts in place of a model it cannot download: the family's own
architecture class, built from transformers' own config class with the catalogue's numbers
(``families.yaml``), the real tokenizer files (chat template and special tokens included), the real number of
embedding rows (``vocab_size``, padded past the tokenizer for Qwen3, Gemma-3 and DeepSeek-V3), and either the real
hidden width (``width="real"``: surgery and memory at the real size) or a reduced one (``width="reduced"``: small
enough to train in a test). Depth is always reduced (``layers``). Its weights are random, so it says nothing about
quality: config.json carries ``vocadapt_twin`` (family, hub id, what was reduced, the note "random weights, not the
real model"), every checkpoint vocadapt writes from it keeps that key, and the registry tags and describes a
version built from one as a twin (``platform/registry/model_versions.py``).

``install_twin_in_hub_cache`` lays a twin out as huggingface_hub's cache does, under the real hub id, so that with
``HF_HUB_OFFLINE=1`` and ``HF_HUB_CACHE`` pointing there, ``source.model: meta-llama/Llama-3.1-8B`` takes exactly the
path a user with the hub takes (``platform/model_loading.py::resolve_model_folder``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from vocadapt.components.errors import UserError
from vocadapt.platform.assets.embedded import file_sha256
from vocadapt.platform.families.catalogue import ModelFamily, model_family

TWIN_KEY = "vocadapt_twin"
TWIN_NOTE = "random weights, not the real model"
# The reduced width: hidden 64 and 4 query heads of 16, the family's query/KV-head ratio and MLP ratio kept.
REDUCED_HIDDEN = 64
REDUCED_HEADS = 4
REDUCED_HEAD_DIM = 16
# DeepSeek-V3's mixture of experts at twin size: a few experts, one group (256 experts in 8 groups in the real one).
TWIN_EXPERTS = {"n_routed_experts": 4, "num_experts_per_tok": 2, "n_group": 1, "topk_group": 1}
# Catalogue keys that are not config arguments.
_NOT_CONFIG = ("class", "model_type")
_SPECIAL_FIELDS = ("bos_token_id", "eos_token_id", "pad_token_id")


def config_class(family: ModelFamily):
    """transformers' own config class for the family's ``model_type`` (LlamaConfig, MistralConfig, ...)."""
    from transformers import AutoConfig

    return type(AutoConfig.for_model(family.architecture["model_type"]))


def twin_config(family_name: str, *, layers: int = 1, width: Literal["real", "reduced"] = "real",
                special_ids: dict[str, int | None] | None = None, seed: int = 0, dtype: str = "bfloat16"):
    """The twin's transformers config: the catalogue's numbers, ``layers`` deep, at the real or reduced width.

    ``special_ids`` (bos/eos/pad from the real tokenizer) replace the catalogue's: the family tokenizers vocadapt
    fetches are the instruction-tuned ones (Llama-3.1's eos is ``<|eot_id|>`` 128009, not the base model's 128001),
    and a checkpoint's config must name its own tokenizer's ids."""
    family = model_family(family_name)
    if width not in ("real", "reduced"):
        raise UserError(f"twin width {width!r}: use 'real' (the family's hidden size) or 'reduced' (hidden "
                        f"{REDUCED_HIDDEN}, for tests that train)")
    if layers < 1:
        raise UserError(f"twin layers {layers}: a twin needs at least one layer")
    numbers = {key: value for key, value in family.architecture.items() if key not in _NOT_CONFIG}
    numbers["num_hidden_layers"] = layers
    if width == "reduced":
        numbers.update(_reduced_width(numbers))
    if family.architecture["model_type"] == "deepseek_v3":
        numbers.update(TWIN_EXPERTS)
        # layer 0 stays dense like the real model's first three; a second layer is a mixture-of-experts layer
        numbers["first_k_dense_replace"] = min(int(numbers["first_k_dense_replace"]), max(1, layers - 1))
    if special_ids is not None:
        numbers.update({field: special_ids.get(field) for field in _SPECIAL_FIELDS})
    config = config_class(family)(**numbers)
    config.architectures = [family.architecture["class"]]
    config.dtype = dtype
    setattr(config, TWIN_KEY, {
        "family": family.name, "display": family.display, "hub_id": family.hub_id, "card": family.card,
        "width": width, "num_hidden_layers": layers, "real_num_hidden_layers": family.architecture["num_hidden_layers"],
        "seed": seed, "note": TWIN_NOTE,
    })
    return config


def _reduced_width(numbers: dict[str, Any]) -> dict[str, Any]:
    """Hidden ``REDUCED_HIDDEN``; heads, head size and MLP scaled so the family's ratios hold."""
    hidden = int(numbers["hidden_size"])
    heads = int(numbers["num_attention_heads"])
    kv_heads = int(numbers.get("num_key_value_heads") or heads)
    scale = REDUCED_HIDDEN / hidden
    reduced = {
        "hidden_size": REDUCED_HIDDEN,
        "intermediate_size": _multiple_of_8(int(numbers["intermediate_size"]) * scale),
        "num_attention_heads": REDUCED_HEADS,
        "num_key_value_heads": max(1, REDUCED_HEADS * kv_heads // heads),  # grouped-query ratio kept
    }
    if "head_dim" in numbers:
        reduced["head_dim"] = REDUCED_HEAD_DIM
    if "query_pre_attn_scalar" in numbers:  # Gemma scales attention by its head size
        reduced["query_pre_attn_scalar"] = REDUCED_HEAD_DIM
    if "kv_lora_rank" in numbers:  # DeepSeek's multi-head latent attention
        reduced.update(q_lora_rank=16, kv_lora_rank=16, qk_nope_head_dim=REDUCED_HEAD_DIM, qk_rope_head_dim=8,
                       v_head_dim=REDUCED_HEAD_DIM,
                       moe_intermediate_size=_multiple_of_8(int(numbers["moe_intermediate_size"]) * scale))
    return reduced


def _multiple_of_8(value: float) -> int:
    return max(8, int(round(value / 8)) * 8)


@dataclass(frozen=True)
class TwinShape:
    """How big a twin is: ``layers`` decoder layers, the family's real width or a reduced one, weights in
    ``dtype``."""

    layers: int = 1
    width: Literal["real", "reduced"] = "real"
    dtype: str = "bfloat16"


def build_twin(family_name: str, out_dir: str | Path, shape: TwinShape = TwinShape(), *, seed: int = 0,
               home: Path | None = None) -> Path:
    """Write a twin of ``family_name`` into ``out_dir`` (created; must not hold a checkpoint already); returns it.

    Safetensors weights drawn by the architecture's own initialisation under ``torch.manual_seed(seed)``: the same
    family, settings and seed give byte-identical safetensors. The tokenizer files are the fetched family's
    (``vocadapt assets --family NAME``), copied unchanged; config.json's bos/eos/pad ids are the tokenizer's.
    Memory: the weights once, in ``dtype`` (a one-layer Llama-3.1 twin at the real width: 1.3 B parameters,
    2.5 GB in bfloat16)."""
    import torch
    from transformers import AutoModelForCausalLM

    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer
    from vocadapt.platform.families.assets import family_tokenizer_dir

    family = model_family(family_name)
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.glob("*.safetensors")):
        raise UserError(f"{out_dir} already holds a checkpoint; give an empty or new folder for the twin")
    tokenizer_dir = family_tokenizer_dir(family.name, home)
    tokenizer = load_pretrained_tokenizer(str(tokenizer_dir))
    special_ids = {field: getattr(tokenizer, field, None) for field in _SPECIAL_FIELDS}
    layers, width, dtype = shape.layers, shape.width, shape.dtype
    config = twin_config(family.name, layers=layers, width=width, special_ids=special_ids, seed=seed, dtype=dtype)
    out_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".twin-", dir=out_dir))
    try:
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
        if type(model).__name__ != family.architecture["class"]:
            raise RuntimeError(f"transformers built {type(model).__name__} for {family.name}, not "
                               f"{family.architecture['class']}")
        model.save_pretrained(staging)
        del model
        for path in sorted(tokenizer_dir.iterdir()):
            if path.is_file():
                shutil.copy2(path, staging / path.name)
        for path in sorted(staging.iterdir()):
            os.replace(path, out_dir / path.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out_dir


def twin_record(model_dir: str | Path) -> dict[str, Any] | None:
    """The ``vocadapt_twin`` record of a checkpoint folder's config.json; None for a real model (or no config)."""
    config_file = Path(model_dir) / "config.json"
    if not config_file.is_file():
        return None
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    record = config.get(TWIN_KEY) if isinstance(config, dict) else None
    if record is None and isinstance(config, dict) and isinstance(config.get("text_config"), dict):
        record = config["text_config"].get(TWIN_KEY)
    return record if isinstance(record, dict) else None


def twin_lineage(source_model: str, record: dict[str, Any]) -> dict[str, str]:
    """The registry's tags for a checkpoint adapted from a twin: ``vocadapt.twin`` says what it is, and the source
    model's name carries the same warning, so no tag, card or description names the real model alone."""
    description = (f"twin of {record.get('display', record.get('family'))} ({record.get('hub_id')}, "
                   f"{record.get('num_hidden_layers')} layers, {record.get('width')} width): {TWIN_NOTE}")
    return {"vocadapt.twin": description,
            "vocadapt.source_model": f"{source_model} (twin: {TWIN_NOTE})" if source_model else f"twin: {TWIN_NOTE}"}


def install_twin_in_hub_cache(twin_dir: str | Path, hub_id: str, cache_dir: str | Path,
                              revision: str = "main") -> Path:
    """Lay ``twin_dir`` out in a huggingface_hub cache as ``hub_id`` at ``revision``; returns the snapshot folder.

    The layout is the hub cache's own: ``models--ORG--NAME/blobs/<sha256>`` (the files' bytes),
    ``snapshots/<commit>/<file>`` (relative symlinks to the blobs; copies where the file system has none) and
    ``refs/<revision>`` (the commit). The commit is a sha1 of the files' names and sha256s, so the same twin
    installs as the same commit. With ``HF_HUB_OFFLINE=1`` and ``HF_HUB_CACHE=cache_dir`` (or ``HF_HOME`` one
    level up, ``HF_HOME/hub``), ``from_pretrained(hub_id)`` and ``snapshot_download(hub_id)`` resolve to it."""
    twin_dir, cache_dir = Path(twin_dir), Path(cache_dir)
    if "/" not in hub_id or hub_id.count("/") != 1:
        raise UserError(f"hub id {hub_id!r}: write it as ORG/NAME (e.g. meta-llama/Llama-3.1-8B)")
    files = sorted(path for path in twin_dir.iterdir() if path.is_file())
    if not files:
        raise UserError(f"{twin_dir} holds no files to install")
    repo = cache_dir / f"models--{hub_id.replace('/', '--')}"
    digests = {path.name: file_sha256(path) for path in files}
    commit = hashlib.sha1("".join(f"{name}\0{digest}\n" for name, digest in digests.items()).encode()).hexdigest()
    snapshot = repo / "snapshots" / commit
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    for path in files:
        blob = repo / "blobs" / digests[path.name]
        if not blob.is_file():
            partial = blob.with_name(blob.name + ".incomplete")
            shutil.copyfile(path, partial)
            os.replace(partial, blob)
        link = snapshot / path.name
        if link.is_symlink() or link.exists():
            link.unlink()
        try:
            link.symlink_to(Path("..") / ".." / "blobs" / blob.name)
        except OSError:  # no symlinks here (some Windows setups): huggingface_hub copies too
            shutil.copyfile(blob, link)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / revision).write_text(commit, encoding="utf-8")
    return snapshot


__all__ = ["TWIN_KEY", "TWIN_NOTE", "TwinShape", "build_twin", "config_class", "install_twin_in_hub_cache", "twin_config",
           "twin_lineage", "twin_record"]
