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
