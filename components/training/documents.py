"""Where a LAPT stream's documents come from, and how one worker reads its shard of them, resumably.

A stream is either *indexed* (a list of strings, or one column of a map-style ``datasets.Dataset``, read by index
from its memory-mapped Arrow files) or *streaming* (a ``datasets.IterableDataset``, e.g. CulturaX with
``streaming: true``).

- Indexed: document ``i`` of a seeded per-epoch shuffle goes to worker ``i mod world_size``; a position (epoch,
  cursor) is found again by index, so resuming reads nothing that came before.
- Streaming: read in the dataset's own order (no shuffle buffer: its content is lost on a restart, so a resumed
  run would not see the same documents), split per worker by ``datasets.distributed.split_dataset_by_node``. The
  position carries the dataset's ``state_dict()`` taken just before the current document was read; resuming
  loads it, and the next document read is that one again. Without a saved state (a position from elsewhere) the
  reader skips ``cursor`` documents, which re-reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ConfigDict, Field

from vocadapt.components.typed_settings import StrictSettings


class DatasetSource(StrictSettings):
    """A Hugging Face dataset as a LAPT stream, e.g. ``DatasetSource("uonlp/CulturaX", "it", streaming=True)``.

    The config's ``lapt.datasets.<stream>`` is this model; unknown keys are refused with the nearest valid name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: str = Field(
        ..., description="Hugging Face dataset id (e.g. 'uonlp/CulturaX'), a builder reading local data_files "
        "('json', 'parquet', 'text'), or a folder written by datasets' save_to_disk."
    )
    config: str | None = Field(None, description="Dataset configuration (CulturaX: the language code, e.g. 'it').")
    split: str = Field("train", description="Split to read.")
    text_field: str = Field("text", description="Field holding each document's text.")
    streaming: bool = Field(
        False, description="Stream instead of downloading it all: read in the dataset's order, split per worker, "
        "resumed from the dataset's own state after a restart."
    )
    data_files: tuple[str, ...] | None = Field(
        None, description="Local files for a 'json', 'parquet' or 'text' builder."
    )

    def __init__(self, dataset: str | None = None, config: str | None = None, split: str = "train",
                 text_field: str = "text", streaming: bool = False, **values: Any) -> None:
        """Positional arguments in field order, as for a dataclass; keywords are validated like a config's."""
        if dataset is not None:
            values["dataset"] = dataset
        super().__init__(config=config, split=split, text_field=text_field, streaming=streaming, **values)

    @classmethod
    def from_any(cls, source: DatasetSource | dict) -> DatasetSource:
        """The source itself, or one validated from a mapping of its fields (unknown keys refused)."""
        return source if isinstance(source, cls) else cls.model_validate(source)


class DatasetColumn(Sequence):
    """The text column of a map-style ``datasets.Dataset`` as a sequence of strings, read row by row on demand."""

    def __init__(self, dataset, text_field: str) -> None:
        self.dataset, self.text_field = dataset, text_field

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return str(self.dataset[int(index)][self.text_field] or "")


@dataclass
class StreamingDocuments:
    """A ``datasets.IterableDataset`` and the field holding each document's text."""

    dataset: Any
    text_field: str
    name: str = ""


def load_dataset_documents(source: DatasetSource | dict) -> DatasetColumn | StreamingDocuments:
    """The documents of one dataset split: a ``DatasetColumn`` or, with ``streaming``, ``StreamingDocuments``."""
    import datasets

    source = DatasetSource.from_any(source)
    folder = Path(source.dataset)
    if folder.is_dir() and any((folder / name).is_file() for name in ("state.json", "dataset_dict.json")):
        loaded = datasets.load_from_disk(str(folder))
        if isinstance(loaded, datasets.DatasetDict):
            if source.split not in loaded:
                raise ValueError(f"dataset {folder} has splits {sorted(loaded)}, not {source.split!r}; set split")
            loaded = loaded[source.split]
        # shards are the unit split_dataset_by_node hands to workers: many, so any worker count divides them
        dataset = (loaded.to_iterable_dataset(num_shards=max(1, min(64, loaded.num_rows))) if source.streaming
                   else loaded)
    else:
        data_files = list(source.data_files) if source.data_files else None
        dataset = datasets.load_dataset(source.dataset, source.config, split=source.split, data_files=data_files,
                                        streaming=source.streaming)
    columns = dataset.column_names  # None for streaming builders that learn them from the rows (json)
    if columns is not None and source.text_field not in columns:
        raise ValueError(_no_field(source.dataset, source.text_field, columns))
    if source.streaming:  # with unknown columns the reader checks each row it reads
        return StreamingDocuments(dataset, source.text_field, source.dataset)
    if len(dataset) == 0:
        raise ValueError(f"dataset {source.dataset!r} split {source.split!r} holds no rows; give a non-empty split")
    return DatasetColumn(dataset.select_columns([source.text_field]), source.text_field)


def _no_field(dataset: str, field: str, columns) -> str:
    return (f"dataset {dataset!r} has no field {field!r} (its fields: {columns}); set text_field to the one "
            "holding the text")


class IndexedReader:
    """One worker's shard of an indexed stream: a seeded shuffle per epoch, every ``world_size``-th document."""

    def __init__(self, documents: Sequence[str], stream_index: int, seed: int, rank: int, world_size: int) -> None:
        if len(documents) < world_size:
            raise ValueError(f"a stream has {len(documents)} documents for {world_size} workers; give more text or "
                             "fewer workers")
        self.documents, self.stream_index = documents, stream_index
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self._shard_epoch, self._shard = -1, np.empty(0, dtype=np.int64)

    def shard(self, epoch: int) -> np.ndarray:
        if epoch != self._shard_epoch:
            order = np.random.default_rng([self.seed, epoch, self.stream_index]).permutation(len(self.documents))
            self._shard_epoch, self._shard = epoch, order[self.rank :: self.world_size]
        return self._shard

    def document(self, epoch: int, cursor: int) -> str | None:
        """The text at (epoch, cursor) of this worker's shard; None past the shard's end."""
        shard = self.shard(epoch)
        return None if cursor >= len(shard) else str(self.documents[int(shard[cursor])])

    def state(self, epoch: int, cursor: int) -> dict | None:
        return None  # the position alone finds the document again

    def restore(self, epoch: int, cursor: int, state: dict | None) -> None:
        pass


class StreamingReader:
    """One worker's part of a streaming dataset, read forward; see the module docstring for resuming."""

    def __init__(self, documents: StreamingDocuments, rank: int, world_size: int) -> None:
        self.documents, self.rank, self.world_size = documents, rank, world_size
        self._split = None
        self._iterator = None
        self._at: tuple[int, int] | None = None  # (epoch, cursor) of the last document read
        self._text: str | None = None
        self._state_before: dict | None = None  # the dataset's state just before the last document was read
        self._resume: tuple[int, int, dict | None] | None = None

    def _start(self, epoch: int, cursor: int, state: dict | None) -> None:
        from datasets.distributed import split_dataset_by_node

        split = split_dataset_by_node(self.documents.dataset, rank=self.rank, world_size=self.world_size)
        if state is not None:
            split.load_state_dict(state)
        elif cursor:  # no saved state: skip by count (re-reads those documents)
            split = split.skip(cursor)
        self._split, self._iterator, self._at = split, iter(split), (epoch, cursor - 1)

    def document(self, epoch: int, cursor: int) -> str | None:
        """The text at (epoch, cursor); positions are asked for in order (each at most twice). None at the end."""
        if self._at == (epoch, cursor):
            return self._text
        if self._resume is not None and self._resume[:2] == (epoch, cursor):
            self._start(*self._resume)
            self._resume = None
        elif self._iterator is None or self._at != (epoch, cursor - 1):
            if cursor != 0:
                raise RuntimeError(f"streaming dataset {self.documents.name!r} read out of order at document "
                                   f"{cursor} of epoch {epoch}")
            self._start(epoch, 0, None)
        self._state_before = self._split.state_dict()
        row = next(self._iterator, None)
        self._at = (epoch, cursor)
        if row is not None and self.documents.text_field not in row:
            raise ValueError(_no_field(self.documents.name, self.documents.text_field, list(row)))
        self._text = None if row is None else str(row[self.documents.text_field] or "")
        return self._text

    def state(self, epoch: int, cursor: int) -> dict | None:
        """What finds (epoch, cursor) again: the state before that document, or after the one before it."""
        if self._resume is not None and self._resume[:2] == (epoch, cursor):
            return self._resume[2]
        if self._at == (epoch, cursor):
            return self._state_before
        if self._at == (epoch, cursor - 1) and self._split is not None:
            return self._split.state_dict()
        return None  # the start of an epoch

    def restore(self, epoch: int, cursor: int, state: dict | None) -> None:
        self._iterator, self._at, self._resume = None, None, (epoch, cursor, state)


def open_reader(documents, stream_index: int, seed: int, rank: int, world_size: int):
    if isinstance(documents, StreamingDocuments):
        return StreamingReader(documents, rank, world_size)
    return IndexedReader(documents, stream_index, seed, rank, world_size)
