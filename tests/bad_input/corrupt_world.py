"""A tiny untied, sharded checkpoint (index, three or more shards, tokenizer.json) and the corruptions the generated
bad-input tests draw from: each takes the folder and a hypothesis ``draw`` and damages one thing, returning what
a refusal must name."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path
from typing import Callable

from hypothesis import strategies as st

from tests.pipelines.tiny_world import build_source_model


def build_sharded_model(root: Path, corpus: Path) -> Path:
    """The tiny Llama (hidden 32, vocabulary ~300, untied head) saved in shards of about 40 KB with an index."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    single = build_source_model(root / "single", [corpus], vocab_size=300, tied=False)
    sharded = root / "sharded"
    model = AutoModelForCausalLM.from_pretrained(str(single))
    model.save_pretrained(str(sharded), max_shard_size="40KB")
    AutoTokenizer.from_pretrained(str(single)).save_pretrained(str(sharded))
    assert (sharded / "model.safetensors.index.json").is_file() and len(list(sharded.glob("*.safetensors"))) >= 3
    return sharded


def shards(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.safetensors"))


def _header(path: Path) -> tuple[int, bytes]:
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    return length, data


def _edit_json(path: Path, edit: Callable[[dict], None]) -> None:
    tree = json.loads(path.read_text(encoding="utf-8"))
    edit(tree)
    path.write_text(json.dumps(tree), encoding="utf-8")


# ---- corruptions: (folder, draw) -> the text a refusal must contain


def truncate_shard(folder: Path, draw) -> str:
    shard = draw(st.sampled_from(shards(folder)))
    data = shard.read_bytes()
    shard.write_bytes(data[: draw(st.integers(0, len(data) - 1))])
    return shard.name


def append_to_shard(folder: Path, draw) -> str:
    shard = draw(st.sampled_from(shards(folder)))
    with open(shard, "ab") as handle:
        handle.write(draw(st.binary(min_size=1, max_size=64)))
    return shard.name


def flip_header_length(folder: Path, draw) -> str:
    shard = draw(st.sampled_from(shards(folder)))
    length, data = _header(shard)
    changed = draw(st.integers(0, 2**20).filter(lambda value: value != length))
    shard.write_bytes(struct.pack("<Q", changed) + data[8:])
    return shard.name


def flip_header_number(folder: Path, draw) -> str:
    """One digit of a shape or a data offset in a shard's header changed (the file keeps its size)."""
    shard = draw(st.sampled_from(shards(folder)))
    length, data = _header(shard)
    header = data[8: 8 + length]
    digits = [index for index, byte in enumerate(header) if chr(byte).isdigit() and header[index - 1: index] in
              (b"[", b",", b" ") + tuple(bytes([d]) for d in b"0123456789")]
    where = draw(st.sampled_from(digits))
    new = draw(st.sampled_from([d for d in b"0123456789" if d != header[where]]))
    shard.write_bytes(data[: 8 + where] + bytes([new]) + data[8 + where + 1:])
    return shard.name


def drop_config(folder: Path, draw) -> str:
    (folder / "config.json").unlink()
    return "config.json"


def drop_shard(folder: Path, draw) -> str:
    shard = draw(st.sampled_from(shards(folder)))
    shard.unlink()
    return shard.name


def duplicate_tensor(folder: Path, draw) -> str:
    """A shard copied under a new name: its tensors are now in two shards."""
    shard = draw(st.sampled_from(shards(folder)))
    shutil.copy(shard, folder / "model-extra.safetensors")
    return "two shards"


def move_tensor_in_index(folder: Path, draw) -> str:
    index = folder / "model.safetensors.index.json"
    weight_map = json.loads(index.read_text())["weight_map"]
    name = draw(st.sampled_from(sorted(weight_map)))
    other = draw(st.sampled_from(sorted({s.name for s in shards(folder)} - {weight_map[name]})))
    _edit_json(index, lambda tree: tree["weight_map"].__setitem__(name, other))
    return name


def index_names_missing_shard(folder: Path, draw) -> str:
    index = folder / "model.safetensors.index.json"
    name = draw(st.sampled_from(sorted(json.loads(index.read_text())["weight_map"])))
    _edit_json(index, lambda tree: tree["weight_map"].__setitem__(name, "model-99999-of-99999.safetensors"))
    return "model-99999-of-99999.safetensors"


def mistype_vocab_size(folder: Path, draw) -> str:
    rows = json.loads((folder / "config.json").read_text())["vocab_size"]
    value = draw(st.one_of(st.integers(-5, 10_000).filter(lambda v: v != rows), st.text(max_size=5),
                           st.floats(allow_nan=True), st.none().map(lambda _: [rows])))
    _edit_json(folder / "config.json", lambda tree: tree.__setitem__("vocab_size", value))
    return "vocab_size"


def special_id_out_of_range(folder: Path, draw) -> str:
    rows = json.loads((folder / "config.json").read_text())["vocab_size"]
    field = draw(st.sampled_from(["bos_token_id", "eos_token_id", "pad_token_id"]))
    value = draw(st.one_of(st.integers(rows, rows + 10_000), st.integers(-100, -1), st.text(min_size=1, max_size=4)))
    _edit_json(folder / "config.json", lambda tree: tree.__setitem__(field, value))
    return field


def config_not_json(folder: Path, draw) -> str:
    text = (folder / "config.json").read_text()
    (folder / "config.json").write_text(text[: draw(st.integers(0, len(text) - 2))])
    return "config.json"


def config_not_utf8(folder: Path, draw) -> str:
    data = (folder / "config.json").read_bytes()
    where = draw(st.integers(0, len(data) - 1))
    (folder / "config.json").write_bytes(data[:where] + b"\xff" + data[where:])
    return "config.json"


def duplicate_token_id(folder: Path, draw) -> str:
    """Two tokens of tokenizer.json's vocabulary given one id."""
    path = folder / "tokenizer.json"
    vocab = json.loads(path.read_text(encoding="utf-8"))["model"]["vocab"]
    first, second = draw(st.lists(st.sampled_from(sorted(vocab)), min_size=2, max_size=2, unique=True))
    _edit_json(path, lambda tree: tree["model"]["vocab"].__setitem__(second, vocab[first]))
    return "share id"


def tokens_past_the_rows(folder: Path, draw) -> str:
    """Added tokens with ids past the embedding rows (a tokenizer grown without resizing the model)."""
    path = folder / "tokenizer.json"
    count = draw(st.integers(1, 40))

    def grow(tree: dict) -> None:
        highest = max([*tree["model"]["vocab"].values(), *(t["id"] for t in tree["added_tokens"])])
        tree["added_tokens"] += [{"id": highest + 1 + i, "content": f"<extra_{i}>", "single_word": False,
                                  "lstrip": False, "rstrip": False, "normalized": False, "special": False}
                                 for i in range(count)]

    _edit_json(path, grow)
    return "resize_token_embeddings"


def tokenizer_not_json(folder: Path, draw) -> str:
    text = (folder / "tokenizer.json").read_text(encoding="utf-8")
    (folder / "tokenizer.json").write_text(text[: draw(st.integers(0, len(text) - 2))], encoding="utf-8")
    return "tokenizer.json"


CORRUPTIONS = [truncate_shard, append_to_shard, flip_header_length, flip_header_number, drop_config, drop_shard,
               duplicate_tensor, move_tensor_in_index, index_names_missing_shard, mistype_vocab_size,
               special_id_out_of_range, config_not_json, config_not_utf8, duplicate_token_id, tokens_past_the_rows,
               tokenizer_not_json]
