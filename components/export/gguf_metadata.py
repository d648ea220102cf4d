"""The metadata a GGUF file carries, read the way the export checks it: a few keys, decoded, the rest skipped.

The gguf package's ``GGUFReader`` parses every key and every array element into its own numpy view when it opens a
file; for a 262,208-token vocabulary (Gemma-3's tokens, scores and token types) that took about 20 s of the export's
check. :func:`gguf_metadata` walks the same key-value section once with ``struct``, decodes only the keys asked for
(numeric arrays in one ``numpy.frombuffer`` each) and steps over the others by their sizes: the same values as
``GGUFReader(path).fields[key].contents()``, checked on a file of every value type written by the gguf package's
``GGUFWriter`` in tests/export/test_gguf_metadata.py.
The value types are the gguf package's (``gguf.GGUFValueType``); the layout is GGUF versions 2 and 3.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np

MAGIC = b"GGUF"
# GGUFValueType -> (struct format, numpy dtype) of its scalars; 8 (string) and 9 (array) are read by hand
SCALARS = {0: ("B", "u1"), 1: ("b", "i1"), 2: ("H", "u2"), 3: ("h", "i2"), 4: ("I", "u4"), 5: ("i", "i4"),
           6: ("f", "f4"), 7: ("?", "?"), 10: ("Q", "u8"), 11: ("q", "i8"), 12: ("d", "f8")}
STRING, ARRAY = 8, 9


class _Walker:
    """A cursor over a GGUF file's bytes in its byte order."""

    def __init__(self, data: mmap.mmap, order: str) -> None:
        self.data, self.order, self.offset = data, order, 0

    def unpack(self, code: str) -> Any:
        value = struct.unpack_from(self.order + code, self.data, self.offset)[0]
        self.offset += struct.calcsize(code)
        return value

    def string(self, decode: bool) -> str | None:
        length = self.unpack("Q")
        start, self.offset = self.offset, self.offset + length
        return str(self.data[start : self.offset], encoding="utf-8") if decode else None

    def value(self, kind: int, decode: bool) -> Any:
        if kind in SCALARS:
            return self.unpack(SCALARS[kind][0]) if decode else self._skip(struct.calcsize(SCALARS[kind][0]))
        if kind == STRING:
            return self.string(decode)
        if kind == ARRAY:
            item, count = self.unpack("I"), self.unpack("Q")
            if item in SCALARS:
                dtype = np.dtype(SCALARS[item][1]).newbyteorder(self.order)
                start, self.offset = self.offset, self.offset + count * dtype.itemsize
                return np.frombuffer(self.data, dtype, count, start).tolist() if decode else None
            if not decode:
                for _ in range(count):
                    self.value(item, decode=False)
                return None
            values = [self.value(item, decode=True) for _ in range(count)]
            if item == ARRAY:  # GGUFReader flattens nested arrays
                values = [element for inner in values for element in inner]
            return values
        raise ValueError(f"unknown GGUF value type {kind} at byte {self.offset}")

    def _skip(self, size: int) -> None:
        self.offset += size


def gguf_metadata(path: Path, keys: Collection[str]) -> dict[str, Any]:
    """``{key: value}`` for each of ``keys`` the GGUF at ``path`` holds (strings as ``str``, numbers as Python
    numbers, arrays as lists); keys it does not hold are left out. ``ValueError`` when the file is not a GGUF."""
    wanted = set(keys)
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if data[:4] != MAGIC:
            raise ValueError(f"{path} is not a GGUF file (it does not start with {MAGIC!r})")
        little = struct.unpack_from("<I", data, 4)[0]
        order = "<" if little & 0xFFFF else ">"  # a big-endian file's version reads as a multiple of 2**16 here
        walker = _Walker(data, order)
        walker.offset = 16  # past the magic, the version and the tensor count
        kv_count = walker.unpack("Q")
        found: dict[str, Any] = {}
        for _ in range(kv_count):
            key = walker.string(decode=True)
            kind = walker.unpack("I")
            value = walker.value(kind, decode=key in wanted)
            if key in wanted:
                found[key] = value
                if len(found) == len(wanted):
                    break
        return found
