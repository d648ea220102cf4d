"""Reading a checkpoint's shard layout and copying shards without loading their tensors.

A safetensors file is an 8-byte little-endian header length, a JSON header (name -> dtype, shape, data_offsets
relative to the end of the header) and the raw tensor bytes. Dropping tensors from a shard therefore needs no
tensor in memory: write a new header and copy the kept byte ranges, 64 MB at a time.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
_COPY_BLOCK = 64 * 1024 * 1024


def weight_map(model_dir: Path) -> dict[str, str]:
    """Tensor name -> shard file name, from the index or the single ``model.safetensors``."""
    index = model_dir / INDEX_NAME
    if index.exists():
        return dict(json.loads(index.read_text())["weight_map"])
    single = model_dir / SINGLE_NAME
    if single.exists():
        return {name: SINGLE_NAME for name in read_header(single)[0]}
    raise ValueError(
        f"{model_dir} has no safetensors weights ({INDEX_NAME} or {SINGLE_NAME}); convert the checkpoint to "
        "safetensors first (weights are read only from safetensors)"
    )


def read_header(path: Path) -> tuple[dict[str, dict], dict | None, int]:
    """(tensor entries, __metadata__, byte offset where tensor data starts)."""
    with open(path, "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
    metadata = header.pop("__metadata__", None)
    return header, metadata, 8 + length


def _copy_range(source, target, start: int, size: int) -> None:
    source.seek(start)
    while size > 0:
        block = source.read(min(_COPY_BLOCK, size))
        if not block:
            raise ValueError(f"{source.name} ends early: it is truncated")
        target.write(block)
        size -= len(block)


def copy_without(source_path: Path, target_path: Path, dropped: set[str]) -> int:
    """Write ``source_path`` minus the tensors in ``dropped``; returns the kept data size in bytes (0: no file)."""
    entries, metadata, data_start = read_header(source_path)
    kept = sorted((name for name in entries if name not in dropped), key=lambda name: entries[name]["data_offsets"][0])
    if not kept:
        return 0
    header: dict[str, dict] = {}
    offset = 0
    for name in kept:
        begin, end = entries[name]["data_offsets"]
        header[name] = {"dtype": entries[name]["dtype"], "shape": entries[name]["shape"], "data_offsets": [offset, offset + end - begin]}
        offset += end - begin
    if metadata is not None:
        header["__metadata__"] = metadata
    encoded = json.dumps(header, separators=(",", ":")).encode("utf-8")
    encoded += b" " * (-len(encoded) % 8)  # the format aligns tensor data to 8 bytes
    with open(source_path, "rb") as source, open(target_path, "wb") as target:
        target.write(struct.pack("<Q", len(encoded)))
        target.write(encoded)
        for name in kept:
            begin, end = entries[name]["data_offsets"]
            _copy_range(source, target, data_start + begin, end - begin)
    return offset


def link_or_copy(source_path: Path, target_path: Path, how: str = "hardlink") -> str:
    """Place ``source_path`` at ``target_path`` without reading it into memory; returns what was done.

    how: "hardlink" (falls back to a copy across file systems), "symlink" or "copy".
    """
    if how == "hardlink":
        try:
            os.link(source_path, target_path)
            return "hardlink"
        except OSError:
            how = "copy"
    if how == "symlink":
        os.symlink(source_path.resolve(), target_path)
        return "symlink"
    if how != "copy":
        raise ValueError(f"link must be 'hardlink', 'symlink' or 'copy', got {how!r}")
    shutil.copyfile(source_path, target_path)
    return "copy"


def data_size(path: Path) -> int:
    entries, _, _ = read_header(path)
    return sum(entry["data_offsets"][1] - entry["data_offsets"][0] for entry in entries.values())
