"""SAVA §6 relative-representation similarity: invariances, anchors, agreement with latentis."""

from __future__ import annotations

import pytest
import torch

from vocadapt.components.evaluation.embedding_similarity import (
    choose_anchors,
    embedding_similarity,
    relative_representation,
    similarity_matrix,
)


def _random_orthogonal(size: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(size, size, generator=generator))
    return q


def test_similarity_is_invariant_to_rotation_and_scale():
    embeddings = torch.randn(200, 16, generator=torch.Generator().manual_seed(0))
    rotated = 3.0 * embeddings @ _random_orthogonal(16, 1)
    anchors = list(range(0, 200, 8))
    assert embedding_similarity(embeddings, rotated, anchors) == pytest.approx(100.0, abs=1e-3)


def test_unrelated_spaces_are_less_similar_than_a_noisy_copy():
    generator = torch.Generator().manual_seed(0)
    embeddings = torch.randn(300, 16, generator=generator)
    noisy = embeddings + 0.3 * torch.randn(300, 16, generator=generator)
    other = torch.randn(300, 24, generator=generator)  # another hidden size is fine
    anchors = list(range(0, 300, 10))
    assert embedding_similarity(embeddings, other, anchors) < embedding_similarity(embeddings, noisy, anchors) < 100


def test_similarity_matrix_is_symmetric_with_full_diagonal():
    generator = torch.Generator().manual_seed(0)
    spaces = {name: torch.randn(50, 8, generator=generator) for name in ("a", "b", "c")}
    names, matrix = similarity_matrix(spaces, list(range(10)))
    assert names == ["a", "b", "c"]
    for i in range(3):
        assert matrix[i][i] == 100.0
        for j in range(3):
            assert matrix[i][j] == matrix[j][i]


def test_anchors_half_word_initial_and_deterministic():
    word_start = {i: i % 3 == 0 for i in range(300)}
    anchors = choose_anchors(range(300), word_start, per_kind=20, seed=4)
    assert len(anchors) == 40 and sum(word_start[a] for a in anchors) == 20
    assert anchors == choose_anchors(range(300), word_start, per_kind=20, seed=4)
    with pytest.raises(ValueError, match="lower anchors per kind"):
        choose_anchors(range(300), word_start, per_kind=150)


def test_relative_representation_is_cosine_to_each_anchor():
    # latentis's cosine_proj computes the same; importing latentis here costs ~30 s on 2 cores, so the check is
    # against torch's own cosine similarity, entry by entry.
    generator = torch.Generator().manual_seed(0)
    x, anchors = torch.randn(40, 12, generator=generator), torch.randn(7, 12, generator=generator)
    expected = torch.nn.functional.cosine_similarity(x[:, None, :], anchors[None, :, :], dim=-1)
    assert relative_representation(x, anchors).shape == (40, 7)
    assert torch.allclose(relative_representation(x, anchors), expected, atol=1e-6)
