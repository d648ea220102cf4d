"""ElChat's post-hoc merge (Yamaguchi et al., TMLR 2025; ../shared/papers/recovery-and-new-initialisers.md §4):
bring an expanded, continued-pre-trained model back towards the chat model it was made from.

For each decoder layer ℓ of a layer→t map (default {0: 0.3, 1: 0.5, -2: 0.5, -1: 0.3}; t is the **chat** model's
share, negative indices count from the last layer), every ``.weight`` tensor of the layer (attention q/k/v/o, MLP
gate/up/down, the layer's norms) becomes ``interp(t, W_adapted, W_chat)``: SLERP on the whole matrix as one vector
(lerp where |cos| > 0.9995) or linear, ``(1 - t)·W_adapted + t·W_chat``. The reference starts from the chat model
and reads only ``.weight`` tensors, so the final norm and the merged layers' biases keep the chat model's values.
Layers outside the map are the adapted model's (``unmerged_layers: chat`` takes the chat model's instead: under
ElChat's 2x2LS training only the mapped layers moved, so both readings agree there). Every input-embedding and
untied LM-head row is the adapted model's, except the rows of the chat tokenizer's special tokens (and, with
``restore_added_tokens``, every added token), which are restored from the chat model. The expanded tokenizer keeps
the chat model's template.

Only an expansion can be merged: the chat model's ids must be the adapted model's first ids, token for token.
Pure torch and safetensors; :func:`merge_model_folders` holds one shard of the adapted model and one chat tensor
in memory at a time.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from vocadapt.components.errors import UserError
from vocadapt.components.merging.settings import MergeSettings
from vocadapt.components.tokenizers.saving import save_tokenizer

LERP_ABOVE = 0.9995  # |cos| of the two weight vectors above which SLERP is numerically a lerp (core/slerp.py)
RECORD_NAME = "vocadapt_merge.json"
_LAYER = re.compile(r"(?:^|\.)(?:layers|h|blocks)\.(\d+)\.")
_ARCHITECTURE_KEYS = ("model_type", "num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
                      "num_key_value_heads", "head_dim")
_WEIGHT_FILES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".pkl")


def resolve_rates(rates: Mapping[int, float], num_layers: int) -> dict[int, float]:
    """{layer: t} with negative layers resolved against ``num_layers`` (the reference's pitfall: a list indexed by
    position only works for its symmetric default). Two keys naming one layer, or a layer out of range, are refused."""
    resolved: dict[int, float] = {}
    for layer, t in rates.items():
        index = layer + num_layers if layer < 0 else layer
        if not 0 <= index < num_layers:
            raise UserError(f"merge rate for layer {layer}: the model has {num_layers} layers (0..{num_layers - 1}, "
                            f"or -{num_layers}..-1); fix merge.rates")
        if index in resolved:
            raise UserError(f"merge rates name layer {index} twice (as {layer} and another key); keep one in "
                            "merge.rates")
        resolved[index] = float(t)
    return dict(sorted(resolved.items()))


def lerp(t: float, adapted: torch.Tensor, chat: torch.Tensor) -> torch.Tensor:
    """(1 - t)·adapted + t·chat, in float32."""
    return (1.0 - t) * adapted.float() + t * chat.float()


def slerp(t: float, adapted: torch.Tensor, chat: torch.Tensor, lerp_above: float = LERP_ABOVE) -> torch.Tensor:
    """Spherical interpolation of two tensors of one shape, each taken as one vector, in float32: t = 0 gives
    ``adapted``, t = 1 ``chat``. Nearly parallel vectors (|cos| > ``lerp_above``) or a zero vector: lerp."""
    a, b = adapted.float().flatten(), chat.float().flatten()
    norm_a, norm_b = a.norm(), b.norm()
    if norm_a == 0 or norm_b == 0:
        return lerp(t, adapted, chat)
    cos = float(torch.dot(a / norm_a, b / norm_b).clamp(-1.0, 1.0))
    if abs(cos) > lerp_above:
        return lerp(t, adapted, chat)
    theta = math.acos(cos)
    sin_theta = math.sin(theta)
    mixed = (math.sin((1.0 - t) * theta) / sin_theta) * a + (math.sin(t * theta) / sin_theta) * b
    return mixed.reshape(adapted.shape)


def restored_token_ids(chat_tokenizer: Any, adapted_tokenizer: Any, *, added_tokens: bool = False) -> list[int]:
    """Ids whose rows come back from the chat model: its special tokens (with ``added_tokens``, every added token).
    Refuses a pair that is not an expansion: each of the chat tokenizer's tokens must keep its id."""
    chat_vocab, adapted_vocab = chat_tokenizer.get_vocab(), adapted_tokenizer.get_vocab()
    moved = [token for token, index in chat_vocab.items() if adapted_vocab.get(token) != index]
    if moved:
        raise UserError(
            f"the merge needs an expanded tokenizer (the chat model's ids first, unchanged), and {len(moved):,} of "
            f"the chat tokenizer's {len(chat_vocab):,} tokens have another id or none in the adapted one (e.g. "
            f"{moved[:3]}): merge only init.mode expand runs, or set merge.method none")
    ids = set(chat_tokenizer.all_special_ids)
    if added_tokens:
        ids |= set(getattr(chat_tokenizer, "added_tokens_decoder", {}) or {})
    return sorted(ids)


class _Plan:
    """Where each tensor of the merged model comes from."""

    def __init__(self, settings: MergeSettings, num_layers: int, restore_ids: list[int], embedding: str,
                 head: str | None):
        if settings.method == "none":
            raise UserError("merge.method is 'none'; choose elchat-slerp or elchat-linear to merge")
        self.settings, self.num_layers = settings, num_layers
        self.rates = resolve_rates(settings.rates, num_layers)
        self.restore_ids, self.embedding, self.head = restore_ids, embedding, head
        self.interpolate: Callable[..., torch.Tensor] = slerp if settings.interpolation == "slerp" else lerp
        self.sources: dict[str, str] = {}  # tensor -> "adapted" / "chat" / "t=0.3" / "rows", for the record

    def merged(self, name: str, adapted: torch.Tensor, chat: Callable[[], torch.Tensor]) -> torch.Tensor:
        """The merged tensor ``name`` from the adapted one and (called only when needed) the chat one."""
        if name in (self.embedding, self.head):
            rows = adapted.clone()
            chat_rows = chat()
            ids = [i for i in self.restore_ids if i < chat_rows.shape[0]]
            rows[ids] = chat_rows[ids].to(rows.dtype)
            self.sources[name] = f"adapted, {len(ids)} special rows from chat"
            return rows
        found = _LAYER.search(name)
        if found is None:  # the final norm (and anything else outside the layers): the chat model's
            self.sources[name] = "chat"
            return chat().to(adapted.dtype)
        layer = int(found.group(1))
        if layer in self.rates:
            if not name.endswith(".weight"):  # biases: only .weight is read, so the chat model's stay
                self.sources[name] = "chat"
                return chat().to(adapted.dtype)
            t = self.rates[layer]
            self.sources[name] = f"{self.settings.interpolation} t={t}"
            return self.interpolate(t, adapted, chat()).to(adapted.dtype)
        if self.settings.unmerged_layers == "chat":
            self.sources[name] = "chat"
            return chat().to(adapted.dtype)
        self.sources[name] = "adapted"
        return adapted

    def record(self) -> dict[str, Any]:
        return {"method": self.settings.method, "rates": self.rates, "num_layers": self.num_layers,
                "unmerged_layers": self.settings.unmerged_layers, "restored_token_ids": self.restore_ids,
                "restore_added_tokens": self.settings.restore_added_tokens, "tensors": dict(self.sources)}


def _check_shapes(adapted: Mapping[str, tuple[int, ...]], chat: Mapping[str, tuple[int, ...]], embedding: str,
                  head: str | None) -> None:
    """Same tensors of the same shapes, except the embedding rows an expansion added (and a head the adapted model
    untied: its chat rows are then the chat model's embedding rows)."""
    rowed = {embedding, head}
    missing = sorted(set(chat) - set(adapted) - rowed)
    extra = sorted(set(adapted) - set(chat) - rowed)
    if missing or extra:
        raise UserError(f"the adapted and chat models have different tensors (only in the chat model: {missing[:3]}; "
                        f"only in the adapted one: {extra[:3]}): merge an adapted model with the chat model it was "
                        "made from")
    for name, shape in adapted.items():
        if name in rowed:
            reference = chat.get(name, chat.get(embedding))
            if len(shape) != 2 or shape[1] != reference[1] or shape[0] < reference[0]:
                raise UserError(f"{name} is {tuple(shape)} in the adapted model and {tuple(reference)} in the chat "
                                "model; an expansion keeps the width and adds rows")
        elif tuple(shape) != tuple(chat[name]):
            raise UserError(f"{name} is {tuple(shape)} in the adapted model and {tuple(chat[name])} in the chat "
                            "model: merge an adapted model with the chat model it was made from")


def _chat_getter(chat: Mapping[str, torch.Tensor], name: str, embedding: str) -> Callable[[], torch.Tensor]:
    return lambda: chat[name] if name in chat else chat[embedding]


@dataclass(frozen=True)
class StateDictLayout:
    """The decoder layers of the two models (the same architecture) and the names of the input-embedding and the
    untied LM-head tensors (head None when tied)."""

    num_layers: int
    embedding: str = "model.embed_tokens.weight"
    head: str | None = None


def merge_state_dicts(adapted: Mapping[str, torch.Tensor], chat: Mapping[str, torch.Tensor], layout: StateDictLayout,
                      *, settings: MergeSettings, restore_ids: list[int]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The merged state dict (the adapted model's names, shapes and dtypes) and a record of where each tensor came
    from; ``restore_ids``: the special tokens whose rows come from the chat model."""
    num_layers, embedding = layout.num_layers, layout.embedding
    head = layout.head if layout.head in adapted else None
    _check_shapes({k: tuple(v.shape) for k, v in adapted.items()}, {k: tuple(v.shape) for k, v in chat.items()},
                  embedding, head)
    plan = _Plan(settings, num_layers, restore_ids, embedding, head)
    merged = {name: plan.merged(name, tensor, _chat_getter(chat, name, embedding)) for name, tensor in adapted.items()}
    return merged, plan.record()


def _read_config(folder: Path, what: str) -> dict[str, Any]:
    path = folder / "config.json"
    if not path.is_file():
        raise UserError(f"{what} {folder} has no config.json; give a model folder (save_pretrained)")
    return json.loads(path.read_text())


def _check_architectures(adapted: dict[str, Any], chat: dict[str, Any]) -> int:
    different = {key: (adapted.get(key), chat.get(key)) for key in _ARCHITECTURE_KEYS
                 if adapted.get(key) != chat.get(key)}
    if different:
        raise UserError(f"the adapted and chat models have different architectures ({different}, adapted vs chat): "
                        "merge an adapted model with the chat model it was made from")
    layers = adapted.get("num_hidden_layers") or adapted.get("n_layer")
    if not layers:
        raise UserError("the model's config.json gives no num_hidden_layers; the merge needs the layer count")
    return int(layers)


def merge_model_folders(adapted_dir: Path, chat_dir: Path, out_dir: Path, settings: MergeSettings) -> dict[str, Any]:
    """Write the merged model (the adapted model's config and expanded tokenizer with the chat model's template)
    to ``out_dir``, built beside it and renamed when complete; returns the record, also saved as
    ``vocadapt_merge.json``. Safetensors only; one adapted shard and one chat tensor are in memory at a time."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    from vocadapt.components.surgery import safetensors_files as files
    from vocadapt.components.surgery.checkpoint import embedding_tensor_names
    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

    adapted_dir, chat_dir, out_dir = Path(adapted_dir), Path(chat_dir), Path(out_dir)
    num_layers = _check_architectures(_read_config(adapted_dir, "adapted model"), _read_config(chat_dir, "chat model"))
    try:
        adapted_map, chat_map = files.weight_map(adapted_dir), files.weight_map(chat_dir)
    except ValueError as error:
        raise UserError(str(error)) from error
    adapted_shapes = _shapes(adapted_dir, adapted_map)
    chat_shapes = _shapes(chat_dir, chat_map)
    embedding, head = embedding_tensor_names(adapted_dir, set(adapted_map))
    _check_shapes(adapted_shapes, chat_shapes, embedding, head)
    chat_tokenizer = load_pretrained_tokenizer(str(chat_dir))
    adapted_tokenizer = load_pretrained_tokenizer(str(adapted_dir))
    restore = restored_token_ids(chat_tokenizer, adapted_tokenizer, added_tokens=settings.restore_added_tokens)
    plan = _Plan(settings, num_layers, restore, embedding, head)

    staging = out_dir.with_name(f".{out_dir.name}.merging")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        handles = {shard: safe_open(str(chat_dir / shard), framework="pt") for shard in set(chat_map.values())}
        for shard in sorted(set(adapted_map.values())):
            with safe_open(str(adapted_dir / shard), framework="pt") as source:
                merged = {}
                for name in source.keys():
                    chat_name = name if name in chat_map else embedding
                    merged[name] = plan.merged(name, source.get_tensor(name),
                                               lambda n=chat_name: handles[chat_map[n]].get_tensor(n))
                metadata = source.metadata() or {"format": "pt"}
            save_file(merged, str(staging / shard), metadata=metadata)
            del merged
        for item in adapted_dir.iterdir():
            if item.is_file() and not item.name.endswith(_WEIGHT_FILES):
                shutil.copy2(item, staging / item.name)
        if chat_tokenizer.chat_template and adapted_tokenizer.chat_template != chat_tokenizer.chat_template:
            adapted_tokenizer.chat_template = chat_tokenizer.chat_template
            save_tokenizer(adapted_tokenizer, staging)
        record = plan.record() | {"adapted_model": str(adapted_dir), "chat_model": str(chat_dir)}
        (staging / RECORD_NAME).write_text(json.dumps(record, indent=2))
        shutil.rmtree(out_dir, ignore_errors=True)
        staging.rename(out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return record


def _shapes(folder: Path, weight_map: Mapping[str, str]) -> dict[str, tuple[int, ...]]:
    from vocadapt.components.surgery import safetensors_files as files

    shapes: dict[str, tuple[int, ...]] = {}
    for shard in sorted(set(weight_map.values())):
        entries, _, _ = files.read_header(folder / shard)
        shapes.update({name: tuple(entry["shape"]) for name, entry in entries.items()})
    return shapes
