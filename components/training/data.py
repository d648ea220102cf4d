"""Language streams, mixing and packing for LAPT.

Each stream (``target``, ``source``) is a list of documents. A worker reads its own shard of each stream (document
``i`` of a seeded per-epoch shuffle goes to worker ``i mod world_size``), tokenizes documents as it reaches them
(content tokens, then EOS to mark the boundary) and packs them back to back into sequences of exactly
``sequence_length`` tokens, so there is no padding. Each sequence comes from one stream. Streams are assigned to the
*global* sequence index (worker ``r`` of ``W`` packs global sequences ``r, r + W, r + 2W, ...``) so that after
``n`` global sequences every stream has had ``share x n`` of them to within one (largest deficit first): the token mix
of every global batch (all workers together) matches the configured proportion (SAVA §4.2: 75% Italian, 25%
English tokens), even with one sequence per worker.

A stream's documents come from files, a list, or a Hugging Face dataset, map-style or streaming
(``documents.py``). The position is a few integers per stream (epoch, document index in the shard, tokens of that
document already used), plus a streaming dataset's own ``state_dict``: resuming re-tokenizes one document, never
re-reads what came before.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from vocadapt.components.training.documents import (
    DatasetSource, StreamingDocuments, load_dataset_documents, open_reader)


@dataclass
class LaptData:
    """Documents per language stream: ``{"target": [...], "source": [...]}``; a stream is a list of strings, a
    ``DatasetColumn`` or ``StreamingDocuments`` (``components.training.documents``)."""

    streams: dict[str, Sequence[str] | StreamingDocuments]

    @classmethod
    def from_files(cls, **files: list[str | Path] | None) -> LaptData:
        """``from_files(target=[...], source=[...])``: .txt (a document per non-empty line), .jsonl or .parquet
        (a ``text`` field). Missing or empty files are an error naming the file."""
        streams = {}
        for name, paths in files.items():
            if paths:
                streams[name] = [doc for path in paths for doc in read_documents(path)]
        return cls(streams)

    @classmethod
    def from_sources(cls, files: dict[str, list[str | Path]] | None = None,
                     datasets: dict[str, DatasetSource | dict | None] | None = None) -> LaptData:
        """Each stream from its files or from a Hugging Face dataset (``DatasetSource`` or its fields), not both."""
        both = sorted(name for name in (files or {}) if (files or {}).get(name) and (datasets or {}).get(name))
        if both:
            raise ValueError(f"streams {both} are given both files and a dataset; give each stream one source")
        data = cls.from_files(**(files or {}))
        for name, source in (datasets or {}).items():
            if source is not None:
                data.streams[name] = load_dataset_documents(source)
        return data


def read_documents(path: str | Path) -> list[str]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"LAPT text file {path} does not exist; check the corpus paths in the config")
    if path.suffix == ".jsonl":
        docs = [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    elif path.suffix == ".parquet":
        import pyarrow.parquet as pq

        docs = [str(text) for text in pq.read_table(path, columns=["text"]).column("text").to_pylist() if text]
    else:
        docs = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    docs = [doc for doc in docs if doc]
    if not docs:
        raise ValueError(f"LAPT text file {path} holds no documents; give a non-empty file")
    return docs


@dataclass
class StreamPosition:
    epoch: int = 0
    cursor: int = 0  # index of the current document in this worker's shard of the epoch's shuffle
    offset: int = 0  # tokens of the current document already packed
    sequences: int = 0  # sequences this stream has contributed
    blank_run: int = 0  # blank documents in a row just before the cursor (a shard of only blanks is an error)


@dataclass
class PackedBatch:
    input_ids: torch.Tensor  # (batch, sequence_length) long
    attention_mask: torch.Tensor  # (batch, sequence_length) long, ones: packed sequences have no padding
    streams: list[str] = field(default_factory=list)  # the stream each row came from

    @property
    def real_tokens(self) -> int:
        return int(self.attention_mask.sum())


@dataclass(frozen=True)
class Worker:
    """This worker's place among the data-parallel workers: ``rank`` of ``world_size``."""

    rank: int = 0
    world_size: int = 1


class PackedMixture:
    """Packed, mixed, sharded and resumable sequences for one worker."""

    def __init__(self, data: LaptData, tokenizer, *, mixing: dict[str, float], sequence_length: int,
                 seed: int = 0, worker: Worker = Worker()) -> None:
        rank, world_size = worker.rank, worker.world_size
        self.names = sorted(name for name, share in mixing.items() if share > 0)
        missing = [name for name in self.names if data.streams.get(name) is None
                   or (not isinstance(data.streams[name], StreamingDocuments) and not len(data.streams[name]))]
        if missing:
            raise ValueError(f"mixing gives a share to {missing} but no documents were given for it; "
                             "add its files or set its share to 0")
        if tokenizer.eos_token_id is None:
            raise ValueError("the tokenizer has no EOS token to mark document boundaries; set tokenizer.eos_token")
        self.readers = {}
        for name in self.names:
            try:
                self.readers[name] = open_reader(data.streams[name], sorted(data.streams).index(name), seed, rank,
                                                 world_size)
            except ValueError as error:
                raise ValueError(f"stream {name!r}: {error}") from error
        self.data, self.tokenizer = data, tokenizer
        self.shares = {name: mixing[name] / sum(mixing[n] for n in self.names) for name in self.names}
        self.sequence_length, self.seed, self.rank, self.world_size = sequence_length, seed, rank, world_size
        self.positions = {name: StreamPosition() for name in self.names}
        self._schedule = _MixSchedule(self.names, self.shares)
        self._tokens: dict[tuple[str, int, int], list[int]] = {}

    def _shard(self, name: str, epoch: int) -> np.ndarray:
        """The document indices of this worker's shard of an indexed stream in ``epoch``."""
        return self.readers[name].shard(epoch)

    def _document_tokens(self, name: str, position: StreamPosition) -> list[int] | None:
        """Content tokens then EOS of the document at ``position``; [] for a blank one; None past the epoch."""
        key = (name, position.epoch, position.cursor)
        if key not in self._tokens:
            text = self.readers[name].document(position.epoch, position.cursor)
            if text is None:
                return None
            self._tokens = {k: v for k, v in self._tokens.items() if k[0] != name}
            content = self.tokenizer(text, add_special_tokens=False)["input_ids"] if text.strip() else []
            self._tokens[key] = [*content, self.tokenizer.eos_token_id] if content else []
        return self._tokens[key]

    def _advance(self, name: str, position: StreamPosition) -> None:
        """Past the current document; into the next epoch when this worker's shard has no more."""
        position.cursor, position.offset = position.cursor + 1, 0
        if self._document_tokens(name, position) is None:
            if position.blank_run >= position.cursor:
                raise ValueError(f"stream {name!r} gives worker {self.rank} of {self.world_size} no text in a whole "
                                 "pass; give more (non-blank) documents or fewer workers")
            position.epoch, position.cursor, position.blank_run = position.epoch + 1, 0, 0

    def next_stream(self) -> str:
        """The stream of this worker's next global sequence index in the mixing schedule."""
        packed = sum(p.sequences for p in self.positions.values())
        return self._schedule.stream_at(packed * self.world_size + self.rank)

    def next_sequence(self) -> tuple[str, list[int]]:
        name = self.next_stream()
        position, sequence = self.positions[name], []
        while len(sequence) < self.sequence_length:
            tokens = self._document_tokens(name, position)
            if tokens is None:
                raise ValueError(f"stream {name!r} gives worker {self.rank} of {self.world_size} no documents; "
                                 "give more text or fewer workers")
            taken = tokens[position.offset : position.offset + self.sequence_length - len(sequence)]
            sequence.extend(taken)
            position.offset += len(taken)
            position.blank_run = 0 if tokens else position.blank_run + 1
            if position.offset == len(tokens):
                self._advance(name, position)
        position.sequences += 1
        return name, sequence

    def next_batch(self, batch_size: int) -> PackedBatch:
        rows = [self.next_sequence() for _ in range(batch_size)]
        input_ids = torch.tensor([ids for _, ids in rows], dtype=torch.long)
        return PackedBatch(input_ids, torch.ones_like(input_ids), [name for name, _ in rows])

    def state_dict(self) -> dict:
        positions = {}
        for name, position in self.positions.items():
            positions[name] = asdict(position)
            reader_state = self.readers[name].state(position.epoch, position.cursor)
            if reader_state is not None:
                positions[name]["reader"] = reader_state
        return {"seed": self.seed, "rank": self.rank, "world_size": self.world_size, "positions": positions}

    def load_state_dict(self, state: dict) -> None:
        if state["world_size"] != self.world_size or state["rank"] != self.rank or state["seed"] != self.seed:
            raise ValueError(
                f"this data position was saved by worker {state['rank']} of {state['world_size']} with seed "
                f"{state['seed']}; resume with the same number of workers and seed, or start a new run name")
        self.positions, self._tokens = {}, {}
        for name in self.names:
            saved = dict(state["positions"][name])
            reader_state = saved.pop("reader", None)
            self.positions[name] = StreamPosition(**saved)
            self.readers[name].restore(saved["epoch"], saved["cursor"], reader_state)
        self._schedule = _MixSchedule(self.names, self.shares)


class _MixSchedule:
    """Which stream global sequence ``g`` comes from: the stream furthest behind its share after ``g`` sequences
    (ties: alphabetical), so every prefix of the global sequence keeps the mix to within one sequence. Computed
    forward and cached, so asking for increasing indices costs O(1) each."""

    def __init__(self, names: list[str], shares: dict[str, float]) -> None:
        self.names, self.shares = names, shares
        self.counts = {name: 0 for name in names}
        self.next_index, self.last = 0, names[0]

    def stream_at(self, index: int) -> str:
        if index < self.next_index - 1:  # asked for the past: start again
            self.__init__(self.names, self.shares)
        while self.next_index <= index:
            total = self.next_index + 1
            self.last = max(self.names, key=lambda n: (self.shares[n] * total - self.counts[n], -self.names.index(n)))
            self.counts[self.last] += 1
            self.next_index += 1
        return self.last
