"""The per-column statistics every Gaussian row is drawn from: blocked over rows and columns, the same bits as the
whole matrix's ``torch.std_mean`` in float32."""

import pytest
import torch

from vocadapt.components.initializers import _common


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_blocked_statistics_equal_the_whole_matrix_bit_for_bit(dtype, monkeypatch):
    # partial blocks on both axes: 1,003 rows in blocks of 64, 70 columns in blocks of 32
    monkeypatch.setattr(_common, "STATISTICS_ROWS", 64)
    monkeypatch.setattr(_common, "STATISTICS_COLUMNS", 32)
    generator = torch.Generator().manual_seed(0)
    matrix = (torch.randn(1003, 70, generator=generator) * 0.02 + 0.01).to(dtype)
    mean, std = _common.source_mean_std(matrix)
    expected_std, expected_mean = torch.std_mean(matrix.float(), dim=0)
    assert torch.equal(mean, expected_mean) and torch.equal(std, expected_std)


def test_a_column_block_gets_the_columns_statistics_of_the_whole_matrix():
    matrix = torch.randn(500, 40, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    mean, std = _common.source_mean_std(matrix)
    block_mean, block_std = _common.source_mean_std(matrix[:, 8:24])
    assert torch.equal(block_mean, mean[8:24]) and torch.equal(block_std, std[8:24])


def test_statistics_are_computed_once_per_matrix_while_it_is_unchanged(monkeypatch):
    """An adapt's methods each read the source statistics of the same two matrices (input embeddings and LM head,
    in turn): the last two are kept; an in-place write to a matrix, or to a view of it, computes them again; a
    matrix that is gone is not kept alive."""
    import gc
    import weakref

    computed = []
    real = _common._column_mean_std
    monkeypatch.setattr(_common, "_column_mean_std", lambda matrix: computed.append(matrix.shape) or real(matrix))
    monkeypatch.setattr(_common, "_STATISTICS", type(_common._STATISTICS)())
    embeddings, head = torch.randn(300, 12), torch.randn(300, 16)
    for _ in range(3):  # three methods, each reading both matrices
        assert torch.allclose(_common.source_mean_std(embeddings)[0], embeddings.mean(0))
        _common.source_mean_std(head)
    assert computed == [(300, 12), (300, 16)]

    embeddings[5:7].add_(1.0)  # through a view
    mean, _ = _common.source_mean_std(embeddings)
    assert torch.allclose(mean, embeddings.mean(0)) and len(computed) == 3

    gone = weakref.ref(head)
    del head
    gc.collect()
    assert gone() is None
