"""Bounded memory: methods registered ``columnwise`` give the same rows on column blocks as on the whole matrix, and
checkpoint surgery streamed through a small budget (several column blocks) writes the same bytes as the
whole-matrix path, while the method never sees more than the budget. The peak-memory figures at 8B and 70B shape
come from ``benchmarks/init_scale.py`` (BENCHMARKS.md), not from a test."""

from __future__ import annotations

import pytest
import torch

from tests.initializers.test_registry import OPTIONS
from tests.initializers.tiny_world import expand_bpe
from vocadapt.components.initializers import InitProblem, available_initializers, get_initializer
from vocadapt.components.surgery import Initialisation, RowLayout, adapt_checkpoint, plan_vocabulary
from vocadapt.components.surgery.checkpoint import CheckpointWriting

HIDDEN = 256  # four 64-column blocks under the smallest budget
COLUMNWISE = [name for name in available_initializers() if get_initializer(name).columnwise]
ROW_BLOCKS = [name for name in available_initializers() if get_initializer(name).row_blocks]


def _llama(vocab_size: int, tied: bool, dtype=torch.float32):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         tie_word_embeddings=tied)
    model = LlamaForCausalLM(config)
    if not tied:
        with torch.no_grad():
            model.lm_head.weight.normal_(0.0, 0.05)
    return model.to(dtype).eval()


def test_columnwise_claim_is_made_by_the_expected_methods():
    streamed = {"fvt", "merge", "random_token", "align", "wechsel", "omp", "focus", "salt", "clp", "random"}
    assert streamed <= set(COLUMNWISE)
    # multivariate's draws span the hidden size; sava normalises whole source rows: both stream by rows instead
    assert "multivariate" not in COLUMNWISE and "sava" not in COLUMNWISE
    assert {"multivariate", "sava"} <= set(ROW_BLOCKS)
    assert not set(ROW_BLOCKS) & set(COLUMNWISE)


@pytest.mark.parametrize("mode", ["replace", "expand"])  # expansion leaves omp 20 new tokens without a vector
@pytest.mark.parametrize("method", COLUMNWISE)
def test_columnwise_methods_give_the_same_rows_block_by_block(method, mode, source_tokenizer, target_tokenizer,
                                                              expanded_tokenizer, corpus_file, fasttext_helper):
    torch.manual_seed(1)
    source = torch.randn(len(source_tokenizer) + 5, HIDDEN)  # padding rows past the tokenizer, as checkpoints have
    target = target_tokenizer if mode == "replace" else expanded_tokenizer
    plan = plan_vocabulary(source_tokenizer, target, source_rows=source.shape[0], layout=RowLayout(mode))
    initializer = get_initializer(method).configure(OPTIONS.get(method))

    def rows(matrix: torch.Tensor, first: int = 0) -> torch.Tensor:
        return initializer(InitProblem(
            matrix, plan.new_target_ids, plan.target_to_source, source_tokenizer, target,
            generator=torch.Generator().manual_seed(3), corpus_files=[corpus_file],
            helper=fasttext_helper if initializer.needs_helper else None, columns=(first, HIDDEN),
        ))

    whole = rows(source)
    blocks = torch.cat([rows(source[:, start : start + 48].contiguous(), start) for start in range(0, HIDDEN, 48)],
                       dim=1)
    assert whole.shape == (len(plan.new_target_ids), HIDDEN)
    assert torch.equal(whole, blocks), f"{method} is registered columnwise but its rows depend on other columns"


def test_fallback_rows_are_the_same_block_by_block_and_follow_each_column():
    """The Gaussian fallback of the columnwise methods: a column's values do not depend on the block it is drawn in,
    and each column has the source column's mean and spread."""
    from vocadapt.components.initializers._common import FALLBACK_CHUNK_ROWS, columnwise_gaussian_rows

    source = torch.randn(400, HIDDEN) * torch.linspace(0.5, 3.0, HIDDEN) + torch.linspace(-2.0, 2.0, HIDDEN)
    count = 2 * FALLBACK_CHUNK_ROWS + 7  # three chunks, the last one short

    def draw(first: int, width: int) -> torch.Tensor:
        problem = InitProblem(source[:, first : first + width].contiguous(), torch.arange(count), {}, None, None,
                              generator=torch.Generator().manual_seed(11), columns=(first, HIDDEN))
        return columnwise_gaussian_rows(problem, count)

    whole = draw(0, HIDDEN)
    assert torch.equal(whole, torch.cat([draw(start, 64) for start in range(0, HIDDEN, 64)], dim=1))
    assert torch.equal(whole[:, 100:130], draw(100, 30))
    torch.testing.assert_close(whole.mean(0), source.mean(0), atol=0.35, rtol=0.0)
    torch.testing.assert_close(whole.std(0) / source.std(0), torch.ones(HIDDEN), atol=0.2, rtol=0.0)
    assert not torch.equal(whole[:FALLBACK_CHUNK_ROWS], whole[FALLBACK_CHUNK_ROWS : 2 * FALLBACK_CHUNK_ROWS])


def _checkpoint(tmp_path, tokenizer, tied: bool, dtype, name: str):
    folder = tmp_path / name
    _llama(len(tokenizer) + 3, tied, dtype).save_pretrained(folder, max_shard_size="200KB")
    tokenizer.save_pretrained(folder)
    return folder


def _tensors(folder) -> dict[str, torch.Tensor]:
    from safetensors import safe_open

    with safe_open(str(folder / "model-vocadapt-embeddings.safetensors"), framework="pt") as handle:
        return {name: handle.get_tensor(name) for name in handle.keys()}


@pytest.mark.parametrize("mode,tied,dtype", [("replace", False, torch.bfloat16), ("replace", True, torch.float32),
                                             ("expand", False, torch.float32)], ids=["untied-bf16", "tied", "expand"])
@pytest.mark.parametrize("method", ["fvt", "align", "random_token", "wechsel", "omp", "focus", "salt", "clp",
                                    "random", "multivariate", "sava"])
def test_streamed_surgery_writes_the_same_bytes_through_a_small_budget(
    tmp_path, monkeypatch, source_tokenizer, target_tokenizer, corpus_file, fasttext_helper, method, mode, tied, dtype,
):
    from transformers import AutoModelForCausalLM

    from vocadapt.components.surgery import streaming

    target = expand_bpe(source_tokenizer, target_tokenizer) if mode == "expand" else target_tokenizer
    source_dir = _checkpoint(tmp_path, source_tokenizer, tied, dtype, "source")
    target.save_pretrained(tmp_path / "target")
    rows = len(source_tokenizer) + 3
    budget = rows * 4 * 64  # a float32 block of 64 columns: four blocks of the 256
    seen, read = [], []
    original, original_rows = streaming.initialise_rows, streaming.TensorRows.rows

    def spy(block, *args, **kwargs):
        seen.append(tuple(block.shape))
        return original(block, *args, **kwargs)

    def rows_spy(self, ids):
        read.append(len(ids))
        return original_rows(self, ids)

    monkeypatch.setattr(streaming, "initialise_rows", spy)
    monkeypatch.setattr(streaming.TensorRows, "rows", rows_spy)
    monkeypatch.setattr(streaming, "ROW_BLOCK_BYTES", 7 * HIDDEN * 4)  # row blocks of 7 (or 14) rows
    row_blocks = get_initializer(method).row_blocks
    if row_blocks:  # read and draw in chunks of 16 rows: several chunks on the tiny vocabulary
        module = __import__(f"vocadapt.components.initializers.{method}", fromlist=["CHUNK_ROWS"])
        monkeypatch.setattr(module, "CHUNK_ROWS", 16)
    initialisation = Initialisation(method, options=OPTIONS.get(method), seed=5, corpus_files=[corpus_file],
                                    helper=fasttext_helper if get_initializer(method).needs_helper else None)
    streamed = adapt_checkpoint(source_dir, tmp_path / "target", tmp_path / "streamed", initialisation,
                                layout=RowLayout(mode), writing=CheckpointWriting(extra_heads=1, memory_budget_bytes=budget))
    whole = adapt_checkpoint(source_dir, tmp_path / "target", tmp_path / "whole", initialisation,
                             layout=RowLayout(mode), writing=CheckpointWriting(extra_heads=1, memory_budget_bytes=None))
    assert streamed["streamed"] and not whole["streamed"]
    if row_blocks:  # never the whole matrix: the rows it reads come 16 at a time
        assert not seen and read and max(read) <= 16
    else:
        assert seen and all(shape[1] == 64 and shape[0] * shape[1] * 4 <= budget for shape in seen)
        assert len(seen) == 4 * (1 if tied else 2)
    expected = _tensors(tmp_path / "whole")
    got = _tensors(tmp_path / "streamed")
    assert list(got) == list(expected) or sorted(got) == sorted(expected)
    for name, tensor in expected.items():
        assert got[name].dtype == tensor.dtype and torch.equal(got[name], tensor), name
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "streamed")
    assert loaded.get_input_embeddings().weight.shape[1] == HIDDEN
    assert not (tmp_path / "streamed" / ".scratch").exists()


def test_a_matrix_within_the_budget_is_one_block():
    from vocadapt.components.surgery.streaming import column_width

    assert column_width(1000, 256, budget_bytes=1000 * 256 * 4) == 256
    assert column_width(128_256, 8_192) == 1_024  # Llama-3.1-70B's shape under the default 512 MiB
    assert column_width(128_256, 4_096) == 1_024
    assert column_width(10_000_000, 8_192) == 64  # never below one 64-column block


def test_blocks_are_sized_for_the_new_rows_too(tmp_path, monkeypatch, source_tokenizer, target_tokenizer,
                                               corpus_file):
    """The new rows' block is held beside the source block, so a vocabulary of many new tokens narrows the blocks
    instead of growing the peak (the peak grew with the new-token count when only the source rows counted)."""
    from vocadapt.components.surgery import streaming

    source_dir = _checkpoint(tmp_path, source_tokenizer, False, torch.float32, "source")
    target_tokenizer.save_pretrained(tmp_path / "target")
    asked = []
    original = streaming.column_width

    def spy(rows, hidden, budget_bytes=streaming.DEFAULT_BUDGET_BYTES):
        asked.append(rows)
        return original(rows, hidden, budget_bytes)

    monkeypatch.setattr(streaming, "column_width", spy)
    rows = len(source_tokenizer) + 3
    report = adapt_checkpoint(source_dir, tmp_path / "target", tmp_path / "streamed",
                              Initialisation("fvt", corpus_files=[corpus_file], seed=5),
                              writing=CheckpointWriting(extra_heads=1, memory_budget_bytes=rows * 4 * 64))
    assert report["streamed"] and asked
    new_tokens = asked[0] - rows
    assert new_tokens > 0 and all(count == asked[0] for count in asked)


@pytest.mark.parametrize("shared,helper_dim", [(300, 8), (6, 10)], ids=["overdetermined", "fewer-shared-than-dims"])
def test_sava_least_squares_by_row_chunks_is_the_whole_solve(shared, helper_dim):
    """sava's map from Q^T T summed over row chunks is lstsq([x, 1], T) on the whole targets, the minimum-norm
    solution included when there are fewer shared tokens than helper dimensions."""
    from vocadapt.components.initializers.sava import ChunkedAffineLstsq, fit_affine_lstsq

    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(shared, helper_dim, generator=generator)
    targets = torch.randn(shared, 24, generator=generator)
    fit = ChunkedAffineLstsq(inputs, 24)
    for first in range(0, shared, 7):
        fit.add(first, targets[first : first + 7])
    torch.testing.assert_close(fit.solution(), fit_affine_lstsq(inputs, targets), atol=1e-9, rtol=1e-9)


def test_row_block_methods_yield_bounded_blocks(monkeypatch, source_tokenizer, target_tokenizer, fasttext_helper):
    """A ``row_blocks`` method yields at most CHUNK_ROWS rows at a time, and its blocks are its whole rows."""
    torch.manual_seed(2)
    source = torch.randn(len(source_tokenizer), HIDDEN)
    plan = plan_vocabulary(source_tokenizer, target_tokenizer, source_rows=source.shape[0], layout=RowLayout("replace"))
    for method in ROW_BLOCKS:
        module = __import__(f"vocadapt.components.initializers.{method}", fromlist=["CHUNK_ROWS"])
        monkeypatch.setattr(module, "CHUNK_ROWS", 16)
        initializer = get_initializer(method).configure()

        def problem():
            return InitProblem(source, plan.new_target_ids, plan.target_to_source, source_tokenizer, target_tokenizer,
                               generator=torch.Generator().manual_seed(3),
                               helper=fasttext_helper if initializer.needs_helper else None)

        blocks = list(initializer.blocks(problem()))
        assert len(blocks) > 1 and all(block.shape[0] <= 16 for block in blocks), method
        assert torch.equal(torch.cat(blocks), initializer(problem())), method


def test_a_row_block_method_failing_mid_stream_leaves_nothing_half_written(tmp_path, monkeypatch, source_tokenizer,
                                                                           target_tokenizer):
    """Streamed by rows, a method whose second block is not finite is stopped with an error naming it, after its first
    block was written: no output folder, no temporary folder, no scratch file is left."""
    import dataclasses

    from vocadapt.components.initializers import _REGISTRY
    from vocadapt.components.initializers import multivariate as module

    source_dir = _checkpoint(tmp_path, source_tokenizer, False, torch.float32, "source")
    target_tokenizer.save_pretrained(tmp_path / "target")
    entry = get_initializer("multivariate")
    draws = entry.row_block_function

    def failing(problem, **options):
        yield next(draws(problem, **options))
        yield torch.full((3, HIDDEN), float("nan"))

    monkeypatch.setitem(_REGISTRY, "multivariate", dataclasses.replace(entry, row_block_function=failing))
    monkeypatch.setattr(module, "CHUNK_ROWS", 16)
    with pytest.raises(RuntimeError, match="multivariate.*non-finite"):
        adapt_checkpoint(source_dir, tmp_path / "target", tmp_path / "out", Initialisation("multivariate", seed=5),
                         writing=CheckpointWriting(memory_budget_bytes=(len(source_tokenizer) + 3) * 4 * 64))
    assert sorted(path.name for path in tmp_path.iterdir()) == ["source", "target"]
