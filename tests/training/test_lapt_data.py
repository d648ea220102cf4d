import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.training.lapt_tiny_world import ENGLISH, ITALIAN
from vocadapt.components.training import LaptData, PackedMixture
from vocadapt.components.training.data import Worker

DATA = LaptData({"target": ITALIAN * 3, "source": ENGLISH * 3})


def _mixture(tokenizer, rank=0, world_size=1, **kwargs):
    options = dict(mixing={"target": 0.75, "source": 0.25}, sequence_length=24, seed=0)
    options.update(kwargs)
    return PackedMixture(DATA, tokenizer, worker=Worker(rank, world_size), **options)


def test_mixing_ratio_measured_on_batches_is_within_two_percent(tokenizer):
    mixture = _mixture(tokenizer)
    counts = {"target": 0, "source": 0}
    for _ in range(25):
        batch = mixture.next_batch(4)
        assert batch.input_ids.shape == (4, 24) and batch.real_tokens == 4 * 24  # packed: no padding
        for name, mask in zip(batch.streams, batch.attention_mask):
            counts[name] += int(mask.sum())
    share = counts["target"] / sum(counts.values())
    assert abs(share - 0.75) <= 0.02


@settings(max_examples=10, deadline=None)
@given(share=st.floats(0.05, 0.95), n=st.integers(1, 40))
def test_every_prefix_keeps_the_mix_to_within_one_sequence(tokenizer, share, n):
    mixture = _mixture(tokenizer, mixing={"target": share, "source": 1 - share}, sequence_length=8)
    names = [mixture.next_sequence()[0] for _ in range(n)]
    assert abs(names.count("target") - share * n) <= 1


def test_packing_keeps_every_document_once_in_order_with_eos_boundaries(tokenizer):
    mixture = _mixture(tokenizer, mixing={"target": 1.0}, sequence_length=16)
    shard = [DATA.streams["target"][i] for i in mixture._shard("target", 0)]
    wanted = [t for doc in shard for t in [*tokenizer(doc, add_special_tokens=False)["input_ids"],
                                         tokenizer.eos_token_id]]
    packed = []
    while len(packed) < len(wanted):
        packed.extend(mixture.next_sequence()[1])
    assert packed[: len(wanted)] == wanted
    assert mixture.positions["target"].epoch == (1 if len(packed) >= len(wanted) else 0)


def test_workers_read_disjoint_shards_that_cover_the_stream(tokenizer):
    shards = [set(_mixture(tokenizer, rank=r, world_size=2)._shard("target", 0).tolist()) for r in (0, 1)]
    assert not shards[0] & shards[1]
    assert shards[0] | shards[1] == set(range(len(DATA.streams["target"])))


def test_resuming_from_a_position_continues_exactly(tokenizer):
    straight = _mixture(tokenizer)
    for _ in range(7):
        straight.next_batch(3)
    interrupted = _mixture(tokenizer)
    for _ in range(4):
        interrupted.next_batch(3)
    resumed = _mixture(tokenizer)
    resumed.load_state_dict(interrupted.state_dict())
    for _ in range(3):
        resumed.next_batch(3)
    assert resumed.next_batch(3).input_ids.tolist() == straight.next_batch(3).input_ids.tolist()


def test_seed_decides_the_order(tokenizer):
    first = [_mixture(tokenizer, seed=s).next_batch(4).input_ids.tolist() for s in (1, 1, 2)]
    assert first[0] == first[1] != first[2]


def test_bad_input_is_named(tokenizer, tmp_path):
    with pytest.raises(ValueError, match="no documents were given"):
        PackedMixture(LaptData({"target": ITALIAN}), tokenizer, mixing={"target": 0.5, "source": 0.5},
                      sequence_length=8)
    state = _mixture(tokenizer).state_dict()
    with pytest.raises(ValueError, match="same number of workers"):
        _mixture(tokenizer, rank=1, world_size=2).load_state_dict(state)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="holds no documents"):
        LaptData.from_files(target=[empty])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        LaptData.from_files(target=[tmp_path / "missing.txt"])


def test_files_of_each_format_are_read(tmp_path):
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "a.txt").write_text("uno\n\ndue\n", encoding="utf-8")
    (tmp_path / "b.jsonl").write_text(json.dumps({"text": "tre"}) + "\n", encoding="utf-8")
    pq.write_table(pa.table({"text": ["quattro"]}), tmp_path / "c.parquet")
    data = LaptData.from_files(target=[tmp_path / "a.txt", tmp_path / "b.jsonl", tmp_path / "c.parquet"], source=None)
    assert data.streams == {"target": ["uno", "due", "tre", "quattro"]}


def test_workers_together_keep_the_mix_in_every_global_batch(tokenizer):
    """Two workers with two sequences each: every global batch of four is 3 target + 1 source (75%)."""
    workers = [_mixture(tokenizer, rank=r, world_size=2) for r in (0, 1)]
    for _ in range(6):
        streams = [name for worker in workers for name in worker.next_batch(2).streams]
        assert streams.count("target") == 3
