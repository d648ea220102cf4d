"""Hugging Face datasets as LAPT streams, without a hub: local JSON Lines files through ``load_dataset("json",
streaming=True)`` and folders written by ``save_to_disk``. Streaming resumes from the dataset's own state, so what
came before the saved position is not read again."""

from __future__ import annotations

import json

import pytest

from tests.training.lapt_tiny_world import ENGLISH, ITALIAN, make_model
from vocadapt.components.training import (
    DatasetSource, LaptData, LaptHooks, LaptRuntime, LaptSettings, PackedMixture, load_dataset_documents, train_lapt)
from vocadapt.components.training.data import Worker

# 24 distinct Italian documents: ITALIAN with a number, so every document can be told apart in the output
DOCUMENTS = [f"{i}. {text}" for i, text in enumerate(ITALIAN * 3)]


@pytest.fixture()
def jsonl_parts(tmp_path):
    """The documents in three JSON Lines files (three shards of a streaming dataset)."""
    paths = []
    for part in range(3):
        path = tmp_path / f"it-{part}.jsonl"
        path.write_text("".join(json.dumps({"id": i, "content": DOCUMENTS[i]}) + "\n"
                                for i in range(part * 8, part * 8 + 8)), encoding="utf-8")
        paths.append(path)
    return paths


def _streaming(paths) -> DatasetSource:
    return DatasetSource("json", data_files=tuple(str(p) for p in paths), text_field="content", streaming=True)


def _mixture(tokenizer, target, rank=0, world_size=1, share=0.75):
    data = LaptData({"target": target, "source": ENGLISH * 2})
    return PackedMixture(data, tokenizer, mixing={"target": share, "source": 1 - share}, sequence_length=16,
                         seed=0, worker=Worker(rank, world_size))


def _seen(tokenizer, batches) -> list[int]:
    """The document numbers whose text appears in the decoded target rows, in order."""
    text = "".join(tokenizer.decode(row) for batch in batches
                   for row, stream in zip(batch.input_ids.tolist(), batch.streams) if stream == "target")
    found = []
    for i, doc in enumerate(DOCUMENTS):
        where = text.find(doc)
        if where >= 0:
            found.append((where, i))
    return [i for _, i in sorted(found)]


def test_config_fields_map_to_a_source():
    source = DatasetSource.from_any({"dataset": "uonlp/CulturaX", "config": "it", "split": "train",
                                     "text_field": "text", "streaming": True, "data_files": None})
    assert source == DatasetSource("uonlp/CulturaX", "it", "train", "text", True)


def test_streaming_dataset_is_read_in_order_and_mixed(tokenizer, jsonl_parts):
    mixture = _mixture(tokenizer, load_dataset_documents(_streaming(jsonl_parts)))
    batches = [mixture.next_batch(4) for _ in range(20)]
    assert _seen(tokenizer, batches)[:10] == list(range(10))  # the dataset's own order, whole documents
    streams = [name for batch in batches for name in batch.streams]
    assert abs(streams.count("target") / len(streams) - 0.75) <= 0.02


def test_streaming_dataset_wraps_into_a_second_epoch(tokenizer, jsonl_parts):
    mixture = _mixture(tokenizer, load_dataset_documents(_streaming(jsonl_parts[:1])), share=1.0)
    for _ in range(40):  # 8 documents of ~20 tokens: several passes
        mixture.next_batch(2)
    assert mixture.positions["target"].epoch >= 2


def test_two_workers_read_disjoint_parts_of_a_stream(tokenizer, jsonl_parts):
    seen = []
    for rank in (0, 1):
        mixture = _mixture(tokenizer, load_dataset_documents(_streaming(jsonl_parts)), rank, 2, share=1.0)
        seen.append(set(_seen(tokenizer, [mixture.next_batch(2) for _ in range(12)])))
    assert seen[0] and seen[1] and not seen[0] & seen[1]


def test_streaming_resume_continues_exactly(tokenizer, jsonl_parts):
    """From the dataset's own state (it reopens the file in progress and skips to the row; earlier files are not
    iterated), and, for a position saved without one, by skipping documents (which re-reads them)."""
    straight = _mixture(tokenizer, load_dataset_documents(_streaming(jsonl_parts)))
    expected = [straight.next_batch(3).input_ids.tolist() for _ in range(30)]
    interrupted, done = _mixture(tokenizer, load_dataset_documents(_streaming(jsonl_parts))), 0
    while interrupted.positions["target"].cursor < 19 or interrupted.positions["target"].offset == 0:
        interrupted.next_batch(3)  # into the third file, in the middle of a document
        done += 1
    state = json.loads(json.dumps(interrupted.state_dict()))  # as the loop writes it
    assert state["positions"]["target"]["reader"]["examples_iterable"]  # the dataset's state_dict
    without_reader = json.loads(json.dumps(state))
    del without_reader["positions"]["target"]["reader"]
    for saved in (state, without_reader):
        resumed = _mixture(tokenizer, load_dataset_documents(_streaming(jsonl_parts)))
        resumed.load_state_dict(saved)
        assert [resumed.next_batch(3).input_ids.tolist() for _ in range(3)] == expected[done : done + 3]


def test_saved_dataset_map_style_and_streaming(tokenizer, tmp_path):
    import datasets

    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": DOCUMENTS})}).save_to_disk(tmp_path / "it")
    column = load_dataset_documents({"dataset": str(tmp_path / "it"), "split": "train"})
    assert len(column) == len(DOCUMENTS) and column[3] == DOCUMENTS[3]
    # map-style behaves as a list: the same seeded shuffle, the same batches
    from_list = _mixture(tokenizer, DOCUMENTS)
    from_disk = _mixture(tokenizer, column)
    assert [from_disk.next_batch(2).input_ids.tolist() for _ in range(5)] == \
        [from_list.next_batch(2).input_ids.tolist() for _ in range(5)]
    stream = load_dataset_documents({"dataset": str(tmp_path / "it"), "streaming": True})
    streamed = _mixture(tokenizer, stream, share=1.0)
    assert _seen(tokenizer, [streamed.next_batch(2) for _ in range(6)])[:3] == [0, 1, 2]


def test_bad_dataset_sources_are_named(tokenizer, jsonl_parts, tmp_path):
    with pytest.raises(ValueError, match="no field 'text'.*content"):  # at loading, or at the first row read
        streaming = DatasetSource("json", data_files=(str(jsonl_parts[0]),), streaming=True)
        _mixture(tokenizer, load_dataset_documents(streaming)).next_batch(1)
    with pytest.raises(ValueError, match="no field 'text'.*content"):
        load_dataset_documents(DatasetSource("json", data_files=(str(jsonl_parts[0]),)))
    with pytest.raises(ValueError, match="both files and a dataset"):
        LaptData.from_sources({"target": [jsonl_parts[0]]}, {"target": _streaming(jsonl_parts)})
    with pytest.raises(ValueError, match="no documents"):  # 8 documents, 9 workers: worker 8 gets nothing
        _mixture(tokenizer, load_dataset_documents(_streaming(jsonl_parts[:1])), rank=8, world_size=9).next_batch(1)


def test_loop_resumes_a_streaming_run_exactly(tokenizer, jsonl_parts, tmp_path):
    settings = LaptSettings(max_steps=6, batch_size=2, sequence_length=16, learning_rate=1e-2, warmup_steps=1,
                            checkpoint_every=3)
    saved = {}

    def keep(step, write, metrics):
        write(tmp_path / f"step-{step}")
        saved[step] = tmp_path / f"step-{step}"

    (tmp_path / "en.txt").write_text("\n".join(ENGLISH * 2), encoding="utf-8")

    def data():
        return LaptData.from_sources({"source": [tmp_path / "en.txt"]}, {"target": _streaming(jsonl_parts)})

    straight = train_lapt(make_model(len(tokenizer)), tokenizer, data(), settings, hooks=LaptHooks(on_checkpoint=keep))
    resumed = train_lapt(make_model(len(tokenizer), seed=1), tokenizer, data(), settings,
                         runtime=LaptRuntime(resume_state=saved[3]))
    assert [step for step, _ in resumed.history] == [1, 2, 3, 4, 5, 6]
    for (_, a), (_, b) in zip(straight.series("loss"), resumed.series("loss")):
        assert a == pytest.approx(b, abs=1e-5)
