"""Checkpoint surgery in bounded memory: a matrix is read, initialised and written a block at a time.

A Llama-3.1-70B-shaped matrix (128,256 x 8,192) is 2 GiB in bf16, and the adapted one as much again, so holding them
whole cannot stay within 4 GB. For a method registered ``columnwise`` (column j of its rows
depends only on column j of the source matrix) the work is split by columns instead:

1. each column block (``rows x width``, source dtype) is read from the source tensor, ``ROW_BLOCK_BYTES`` of rows at
   a time with plain reads (no memory map: mapped pages count as the process's resident memory, page-cache pages
   do not), and given to the method as it is; the method reads the rows it needs as float32;
2. its (N, width) new rows go to disk;
3. the output tensor is written to the new shard in row blocks: source rows kept (expansion), shared rows copied
   (read by runs of consecutive ids) and new rows gathered from the column blocks.

``width`` is the largest multiple of 64 whose float32 block fits ``budget_bytes`` (one block, the whole matrix, when
it fits: then the result is the whole-matrix result bit for bit); the peak is set by the budget, not by the
vocabulary or the hidden size. Each block gets a generator seeded with the same seed, so a method whose draws do not
depend on the hidden size (random_token's row picks) draws the same in every block, and the block's place in the
matrix (``InitProblem.columns``), so a Gaussian row (random's, or the fallback row of fvt, wechsel, omp, focus, clp
and salt for a token with no source piece or no vector) gets the values of its columns in the whole-matrix draw: the
streamed checkpoint is the whole-matrix one byte for byte.

**Which methods stream.** Those registered ``columnwise``: fvt, merge, random_token, align, wechsel, omp, focus, clp,
salt and random. Each new row is a fixed combination of source rows (pieces, aligned tokens, word-vector or helper
neighbours, pursuit atoms, per-token least-squares coefficients) or a copy of one, with weights computed from
tokenizers, corpus, word vectors or helper, never from the source matrix, or a column-by-column Gaussian draw; the
costly part (decomposition, alignment, neighbour search, pursuit, sparsemax weights) runs once and is reused by every
block and by the LM head (clp's dense weights are recomputed per block instead: ``clp.py`` says why).

**Methods that stream by rows.** multivariate draws from the (hidden x hidden) covariance of the source rows, and sava
standardises and L2-normalises whole source rows before fitting its affine map into the full hidden space: a row of
either depends on every column, so a column block cannot produce its columns. They are registered ``row_blocks``
instead (:func:`initialise_by_rows`): the source stays on disk, the method reads the rows it needs a bounded chunk at
a time (:class:`TensorRows`) and yields its new rows a chunk at a time, each written to a full-width file as it comes;
what it holds is its own statistics (multivariate's covariance and Cholesky factor, 0.5 GiB each in float64 at
hidden 8,192; sava's helper-side QR and helper x hidden map), not a vocabulary-sized matrix. The blocks concatenate to
the whole-matrix path's rows byte for byte (the registry's ``function`` is that concatenation).
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vocadapt.components.initializers import ConfiguredInitializer
from vocadapt.components.surgery import safetensors_files as files
from vocadapt.components.surgery.matrices import initialise_row_blocks, initialise_rows
from vocadapt.components.surgery.plan import VocabularyPlan

DEFAULT_BUDGET_BYTES = 512 * 1024 * 1024  # one float32 column block: 128,256 rows x 1,024 columns
ROW_BLOCK_BYTES = 64 * 1024 * 1024  # rows read or written at once
_DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "F64": torch.float64}
_NAMES = {dtype: name for name, dtype in _DTYPES.items()}


def column_width(rows: int, hidden: int, budget_bytes: int = DEFAULT_BUDGET_BYTES) -> int:
    """Columns per block: the whole hidden size when ``rows`` float32 rows of it fit the budget, else the largest
    multiple of 64 that fits (at least 64). ``rows`` counts every row a block holds at once: the source rows read
    and the new rows written."""
    if rows * hidden * 4 <= budget_bytes:
        return hidden
    return max(64, (budget_bytes // (rows * 4)) // 64 * 64)


class TensorFile:
    """One 2-D tensor of a safetensors file, read by rows with plain file reads."""

    def __init__(self, path: Path, name: str) -> None:
        entries, _, data_start = files.read_header(path)
        entry = entries[name]
        if len(entry["shape"]) != 2 or entry["dtype"] not in _DTYPES:
            raise ValueError(f"{path}: {name} is {entry['dtype']} {entry['shape']}; a 2-D float tensor is expected")
        self.rows, self.hidden = entry["shape"]
        self.dtype = _DTYPES[entry["dtype"]]
        self.row_bytes = self.hidden * torch.finfo(self.dtype).bits // 8
        self.start = data_start + entry["data_offsets"][0]
        self.handle = open(path, "rb")

    def read(self, first: int, count: int, out: torch.Tensor | None = None) -> torch.Tensor:
        """Rows ``first .. first + count - 1`` as a (count, hidden) tensor of the file's dtype; ``out``: a contiguous
        tensor of at least that many bytes to read them into (a buffer reused from call to call) instead of a new
        one."""
        size = count * self.row_bytes
        buffer = torch.empty(size, dtype=torch.uint8) if out is None else out.view(torch.uint8).view(-1)[:size]
        self.handle.seek(self.start + first * self.row_bytes)
        if self.handle.readinto(memoryview(buffer.numpy())) != len(buffer):
            raise ValueError(f"{self.handle.name} ends early: it is truncated")
        return buffer.view(self.dtype).view(count, self.hidden)

    def gather(self, ids: np.ndarray) -> torch.Tensor:
        """Rows ``ids`` (ascending or not), read one run of consecutive ids at a time."""
        out = torch.empty(len(ids), self.hidden, dtype=self.dtype)
        if not len(ids):
            return out
        order = np.argsort(ids, kind="stable")
        sorted_ids = ids[order]
        breaks = np.flatnonzero(np.diff(sorted_ids) != 1) + 1
        for run in np.split(np.arange(len(ids)), breaks):
            out[torch.from_numpy(order[run])] = self.read(int(sorted_ids[run[0]]), len(run))
        return out

    def close(self) -> None:
        self.handle.close()


class TensorRows:
    """A :class:`TensorFile` as a ``row_blocks`` method reads its source matrix: ``shape`` and float32 ``rows(ids)``."""

    def __init__(self, source: TensorFile) -> None:
        self.source = source
        self.shape = (source.rows, source.hidden)

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        return self.source.gather(ids.numpy()).float()


class ShardWriter:
    """A safetensors file whose tensors are declared up front and whose bytes are then written in order."""

    def __init__(self, path: Path, tensors: list[tuple[str, torch.dtype, tuple[int, ...]]]) -> None:
        header: dict[str, Any] = {}
        offset = 0
        self.sizes: dict[str, int] = {}
        for name, dtype, shape in tensors:
            size = int(np.prod(shape)) * torch.finfo(dtype).bits // 8
            header[name] = {"dtype": _NAMES[dtype], "shape": list(shape), "data_offsets": [offset, offset + size]}
            self.sizes[name] = size
            offset += size
        header["__metadata__"] = {"format": "pt"}
        encoded = json.dumps(header, separators=(",", ":")).encode("utf-8")
        encoded += b" " * (-len(encoded) % 8)  # the format aligns tensor data to 8 bytes
        self.data_start = 8 + len(encoded)
        self.offsets = {name: header[name]["data_offsets"][0] for name, _, _ in tensors}
        self.handle = open(path, "wb")
        self.handle.write(struct.pack("<Q", len(encoded)) + encoded)

    def write(self, block: torch.Tensor) -> None:
        """The next bytes of the file: rows of the tensor being written, in order."""
        self.handle.write(memoryview(block.contiguous().view(torch.uint8).numpy()))

    def copy(self, source_name: str) -> None:
        """The next tensor is a byte copy of ``source_name`` (already written)."""
        self.handle.flush()
        with open(self.handle.name, "rb") as reader:
            files._copy_range(reader, self.handle, self.data_start + self.offsets[source_name], self.sizes[source_name])

    def close(self) -> None:
        expected = self.data_start + sum(self.sizes.values())
        if self.handle.tell() != expected:
            raise RuntimeError(f"{self.handle.name}: wrote {self.handle.tell()} bytes, expected {expected}")
        self.handle.close()


def read_columns(source: TensorFile, first: int, width: int) -> torch.Tensor:
    """Columns ``first .. first + width - 1`` of the source tensor as a (rows, width) tensor of its dtype, read
    ``ROW_BLOCK_BYTES`` of rows at a time into one reused buffer. Each block re-reads the tensor (from the page
    cache after the first pass): writing the column blocks to disk first cost more than the reads (Qwen3's
    151,936 x 4,096 pair: 2.5 GB written, 27 s of a 92 s surgery on a busy 2-core machine)."""
    block = torch.empty(source.rows, width, dtype=source.dtype)
    step = max(1, ROW_BLOCK_BYTES // source.row_bytes)
    buffer = torch.empty(min(step, source.rows) * source.row_bytes, dtype=torch.uint8)
    for row in range(0, source.rows, step):
        count = min(step, source.rows - row)
        block[row : row + count] = source.read(row, count, out=buffer)[:, first : first + width]
    return block


def initialise_by_columns(
    source: TensorFile, plan: VocabularyPlan, method: ConfiguredInitializer, folder: Path, *,
    budget_bytes: int = DEFAULT_BUDGET_BYTES, **problem: Any,
) -> tuple[list[tuple[Path, int, int]], float]:
    """Run ``method`` on each column block; returns [(new-rows file, first column, width)] and the method's seconds.

    The new rows are stored in the source dtype, as the whole-matrix path stores them."""
    # the new rows' block is held beside the source block: sized from the source rows alone, a vocabulary of many
    # new tokens made the peak grow with their count (1.6 -> 2.2 GB at 65,536 source rows, 28K -> 53K new tokens)
    width = column_width(source.rows + len(plan.new_target_ids), source.hidden, budget_bytes)
    results, seconds = [], 0.0
    for index, first in enumerate(range(0, source.hidden, width)):
        # in the source dtype (half the budget for bf16): the method reads the rows it needs as float32
        block = read_columns(source, first, min(width, source.hidden - first))
        started = time.perf_counter()
        rows = initialise_rows(block, plan, method, columns=(first, source.hidden), **problem)
        seconds += time.perf_counter() - started
        del block
        out = folder / f"new-rows-{index}.bin"
        out.write_bytes(memoryview(rows.to(source.dtype).contiguous().view(torch.uint8).numpy()))
        results.append((out, first, rows.shape[1]))
        del rows
    return results, seconds


def initialise_by_rows(
    source: TensorFile, plan: VocabularyPlan, method: ConfiguredInitializer, folder: Path, **problem: Any,
) -> tuple[list[tuple[Path, int, int]], float]:
    """Run a ``row_blocks`` method on the source matrix left on disk, writing each row block of new rows as it comes;
    returns [(new-rows file, 0, hidden)] (one full-width block, as :func:`write_adapted` reads it) and the method's
    seconds (reading the rows it asks for included)."""
    out = folder / "new-rows-full.bin"
    seconds = 0.0
    with open(out, "wb") as handle:
        blocks = initialise_row_blocks(TensorRows(source), plan, method, **problem)
        while True:
            started = time.perf_counter()
            rows = next(blocks, None)
            seconds += time.perf_counter() - started
            if rows is None:
                break
            handle.write(memoryview(rows.to(source.dtype).contiguous().view(torch.uint8).numpy()))
            del rows
    return [(out, 0, source.hidden)], seconds


def write_adapted(
    writer: ShardWriter, source: TensorFile, plan: VocabularyPlan, new_rows: list[tuple[Path, int, int]]
) -> None:
    """The adapted (plan.rows, hidden) tensor into ``writer``, a row block at a time: as ``assemble_matrix``
    builds it (kept source rows for expansion, then shared rows copied, then new rows), never whole."""
    targets = np.fromiter(plan.target_to_source.keys(), dtype=np.int64, count=len(plan.target_to_source))
    sources = np.fromiter(plan.target_to_source.values(), dtype=np.int64, count=len(plan.target_to_source))
    order = np.argsort(targets, kind="stable")
    targets, sources = targets[order], sources[order]
    kept = min(plan.rows, source.rows) if plan.mode == "expand" else 0
    # an expansion's shared tokens keep their ids: those rows are read with the kept ones, not gathered again
    moved = (targets != sources) | (targets >= kept)
    targets, sources = targets[moved], sources[moved]
    new_ids = plan.new_target_ids.numpy()
    element = torch.finfo(source.dtype).bits // 8
    readers = [(open(path, "rb"), first, width) for path, first, width in new_rows]
    try:
        step = max(1, ROW_BLOCK_BYTES // source.row_bytes)
        buffer = torch.empty(min(step, plan.rows), source.hidden, dtype=source.dtype)  # reused by every row block
        for first in range(0, plan.rows, step):
            last = min(plan.rows, first + step)
            out = buffer[: last - first]
            copied = max(0, min(last, kept) - first)
            if copied:
                source.read(first, copied, out=out)  # straight into the block's first rows
            out[copied:] = 0
            lo, hi = np.searchsorted(targets, [first, last])
            if hi > lo:
                out[torch.from_numpy(targets[lo:hi] - first)] = source.gather(sources[lo:hi])
            lo, hi = np.searchsorted(new_ids, [first, last])
            if hi > lo:
                where = torch.from_numpy(new_ids[lo:hi] - first)
                for handle, column, width in readers:
                    handle.seek(int(lo) * width * element)
                    raw = torch.empty(int(hi - lo) * width * element, dtype=torch.uint8)
                    handle.readinto(memoryview(raw.numpy()))
                    out[where, column : column + width] = raw.view(source.dtype).view(-1, width)
            writer.write(out)
    finally:
        for handle, _, _ in readers:
            handle.close()
