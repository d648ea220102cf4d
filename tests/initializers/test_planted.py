"""Planted structure each method must recover: FVT means, SAVA's affine map, SALT's local maps, CLP and
FOCUS weights, Merge's tree, Align's frequencies."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vocadapt.components.helpers import TokenVectors
from vocadapt.components.initializers import InitProblem, get_initializer
from vocadapt.components.initializers._common import unit_rows
from vocadapt.components.initializers.clp import clp_weights
from vocadapt.components.initializers.focus import focus_weights


def _problem(source_matrix, new_ids, overlap, helper=None, source_tokenizer=None, target_tokenizer=None, corpus=()):
    return InitProblem(
        source_matrix=source_matrix, new_target_ids=torch.as_tensor(new_ids, dtype=torch.long), overlap=overlap,
        source_tokenizer=source_tokenizer if source_tokenizer is not None else list(range(source_matrix.shape[0])),
        target_tokenizer=target_tokenizer, helper=helper, corpus_files=list(corpus),
    )


def _run(method, problem, **options):
    return get_initializer(method).function(problem, **options)


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_fvt_row_is_the_mean_of_its_source_pieces(seed, source_tokenizer, target_tokenizer):
    from vocadapt.components.tokenizers import source_pieces, token_overlap

    generator = torch.Generator().manual_seed(seed)
    source = torch.randn(len(source_tokenizer), 12, generator=generator)
    overlap = token_overlap(source_tokenizer, target_tokenizer).target_to_source
    new_ids = [token_id for token_id in range(len(target_tokenizer)) if token_id not in overlap]
    rows = _run("fvt", _problem(source, new_ids, overlap, None, source_tokenizer, target_tokenizer))
    pieces = source_pieces(target_tokenizer, new_ids, source_tokenizer)
    expected = torch.stack([source[token_pieces].mean(0) for token_pieces in pieces])
    assert torch.allclose(rows, expected, atol=1e-6)
    assert any(len(token_pieces) > 1 for token_pieces in pieces)


def _planted_affine(seed: int, tokens: int = 400, shared: int = 300, helper_dim: int = 8, hidden: int = 16):
    generator = torch.Generator().manual_seed(seed)
    helper_vectors = torch.randn(tokens, helper_dim, generator=generator) * torch.linspace(0.5, 3, helper_dim) + 2
    weights = torch.randn(helper_dim, hidden, generator=generator)
    bias = 3 * torch.randn(hidden, generator=generator)
    source = helper_vectors @ weights + bias
    helper = TokenVectors(helper_vectors, torch.ones(tokens, dtype=torch.bool), "vectors", "planted")
    return source, helper, {token: token for token in range(shared)}, list(range(shared, tokens))


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_sava_recovers_a_planted_affine_map(seed):
    """The "paired" normalisation keeps an affine relation exactly affine and recovers it; the default (the authors'
    independent normalisation, each side divided by its own row norms) bends it a little."""
    source, helper, overlap, new_ids = _planted_affine(seed)
    centre = source[: len(overlap)].mean(0)  # cosine of centred rows: the shared mean alone would give ~0.9
    paired = _run("sava", _problem(source, new_ids, overlap, helper), normalise="paired")
    assert torch.nn.functional.cosine_similarity(paired - centre, source[new_ids] - centre).min() >= 0.999
    rows = _run("sava", _problem(source, new_ids, overlap, helper))
    assert torch.nn.functional.cosine_similarity(rows - centre, source[new_ids] - centre).min() >= 0.95


def test_sava_sgd_variant_runs_latentis_and_approaches_the_map():
    source, helper, overlap, new_ids = _planted_affine(0)
    rows = _run("sava", _problem(source, new_ids, overlap, helper), solver="sgd", steps=150, lr=3e-2)
    centre = source[: len(overlap)].mean(0)
    assert torch.nn.functional.cosine_similarity(rows - centre, source[new_ids] - centre).mean() > 0.95


def _planted_clusters(bias_scale: float):
    """Three clusters of helper vectors, each with its own map into the source space: linear (bias_scale 0) or
    affine, x W + b. Returns source rows, the new ids (two per cluster), the overlap and the helper."""
    generator = torch.Generator().manual_seed(0)
    helper_dim, hidden, per_cluster = 4, 10, 24
    maps = torch.randn(3, helper_dim, hidden, generator=generator)
    biases = bias_scale * torch.randn(3, hidden, generator=generator)
    vectors, rows = [], []
    for cluster in range(3):
        centre = torch.zeros(helper_dim)
        centre[cluster] = 5.0
        points = centre + 0.5 * torch.randn(per_cluster, helper_dim, generator=generator)
        vectors.append(points)
        rows.append(points @ maps[cluster] + biases[cluster])
    vectors, source = torch.cat(vectors), torch.cat(rows)
    new_ids = [cluster * per_cluster + offset for cluster in range(3) for offset in (0, 1)]
    overlap = {token: token for token in range(len(source)) if token not in new_ids}
    helper = TokenVectors(vectors, torch.ones(len(vectors), dtype=torch.bool), "vectors", "planted")
    return source, new_ids, overlap, helper


def test_salt_recovers_planted_per_neighbourhood_maps():
    """The paper's form (linear maps, plain pseudo-inverse) recovers each cluster's planted linear map exactly; one
    global map (SAVA) cannot fit three different maps."""
    source, new_ids, overlap, helper = _planted_clusters(bias_scale=0.0)
    result = _run("salt", _problem(source, new_ids, overlap, helper), temperature=0.2, ridge=1e-9, intercept=0.0)
    assert torch.allclose(result, source[new_ids], atol=1e-3, rtol=1e-3)
    defaults = _run("salt", _problem(source, new_ids, overlap, helper), temperature=0.2)  # ridge 1, intercept 1
    assert torch.nn.functional.cosine_similarity(defaults, source[new_ids]).min() > 0.95
    global_fit = _run("sava", _problem(source, new_ids, overlap, helper))
    assert not torch.allclose(global_fit, source[new_ids], atol=1e-1)


def test_salt_intercept_recovers_planted_affine_maps_that_the_linear_form_misses():
    """Per-cluster maps with a bias: the intercept coordinate fits x W + b exactly; the paper's linear form cannot
    represent the bias and misses."""
    source, new_ids, overlap, helper = _planted_clusters(bias_scale=3.0)
    affine = _run("salt", _problem(source, new_ids, overlap, helper), temperature=0.2, ridge=1e-9, intercept=1.0)
    assert torch.allclose(affine, source[new_ids], atol=1e-3, rtol=1e-3)
    linear = _run("salt", _problem(source, new_ids, overlap, helper), temperature=0.2, ridge=1e-9, intercept=0.0)
    assert (linear - source[new_ids]).norm(dim=1).max() > 0.1


def test_salt_intercept_keeps_the_neighbours_common_component_when_the_query_is_outside_their_span():
    """Fewer neighbours than helper dimensions (always, with fastText and a few dozen neighbours): a new token
    whose helper vector is orthogonal to its neighbours' gets the origin from the linear form and about the mean
    of the neighbours' source rows, their shared component, from the affine form (all the more, the larger the
    intercept)."""
    generator = torch.Generator().manual_seed(2)
    helper_dim, hidden = 16, 8
    vectors = torch.zeros(5, helper_dim)
    vectors[1:, :4] = torch.eye(4) + 0.1  # four shared tokens spanning the first four directions
    vectors[0, 8] = 1.0  # the new token: orthogonal to them
    common = 5.0 * torch.ones(hidden)
    source = common + 0.1 * torch.randn(5, hidden, generator=generator)
    overlap = {token: token for token in range(1, 5)}
    helper = TokenVectors(vectors, torch.ones(5, dtype=torch.bool), "vectors", "orthogonal")
    problem = _problem(source, [0], overlap, helper)
    # a high temperature keeps all four neighbours (their cosines with the query are all 0)
    linear = _run("salt", problem, temperature=10.0, ridge=1e-9, intercept=0.0)
    assert linear.norm() < 1e-4
    mean = source[1:].mean(0)
    previous_share = 0.0
    for intercept in (1.0, 3.0, 10.0):  # the coefficients sum to c^2-weighted shares of one, rising with c
        affine = _run("salt", problem, temperature=10.0, ridge=1e-9, intercept=intercept)[0]
        assert torch.nn.functional.cosine_similarity(affine, mean, dim=0) > 0.999
        share = float(affine.norm() / mean.norm())
        assert previous_share < share <= 1.0
        previous_share = share
    assert previous_share > 0.98


def test_salt_ridge_keeps_rows_bounded_when_neighbours_are_nearly_collinear():
    """Neighbours whose helper vectors vary only a little (1e-3, in a few directions) and a new token that lies
    further out along one of those directions (as with fastText: dozens of close neighbours in 100 dimensions): the
    plain pseudo-inverse divides by the small variation and the row explodes; the ridge keeps it on the scale of the
    neighbours' source rows."""
    generator = torch.Generator().manual_seed(1)
    helper_dim, hidden, count = 64, 16, 20
    base = torch.randn(helper_dim, generator=generator)
    vectors = base.repeat(count, 1)
    vectors[:, :5] += 1e-3 * torch.randn(count, 5, generator=generator)
    vectors[0, 0] += 0.5
    vectors[1, 1] += 0.5
    source = torch.randn(count, hidden, generator=generator)  # unrelated rows: no map explains them
    new_ids = [0, 1]
    overlap = {token: token for token in range(count) if token not in new_ids}
    helper = TokenVectors(vectors, torch.ones(count, dtype=torch.bool), "vectors", "collinear")
    problem = _problem(source, new_ids, overlap, helper)
    plain = _run("salt", problem, ridge=1e-12, intercept=0.0)
    regularised = _run("salt", problem)
    scale = source.norm(dim=1).max()
    assert plain.norm(dim=1).max() > 5 * scale  # the failure the ridge is there for
    assert regularised.norm(dim=1).max() <= scale


def test_salt_falls_back_to_random_rows_with_too_few_neighbours():
    source, helper, overlap, new_ids = _planted_affine(1)
    rows = _run("salt", _problem(source, new_ids, overlap, helper), min_neighbours=10_000, max_neighbours=10_000)
    mean, std = source.mean(0), source.std(0)
    assert ((rows - mean) / std).abs().max() < 6 and not torch.allclose(rows, source[new_ids], atol=1.0)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), top_k=st.sampled_from([0, 1, 3]))
def test_clp_weights_are_non_negative_and_sum_to_one(seed, top_k):
    similarity = torch.rand(5, 30, generator=torch.Generator().manual_seed(seed)) * 2 - 1
    similarity[0] = -0.5  # a row with no positive similarity
    weights = clp_weights(similarity, top_k)
    assert torch.allclose(weights.sum(1), torch.ones(5)) and (weights >= 0).all()
    if top_k:
        assert ((weights[1:] > 0).sum(1) <= top_k).all()


def test_clp_copies_the_most_similar_shared_token_with_top_k_one():
    source, helper, overlap, new_ids = _planted_affine(2)
    helper.vectors[new_ids[0]] = helper.vectors[7]
    rows = _run("clp", _problem(source, new_ids, overlap, helper), top_k=1)
    assert torch.allclose(rows[0], source[7])


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_focus_weights_are_sparse_and_sum_to_one(seed):
    similarity = torch.rand(6, 200, generator=torch.Generator().manual_seed(seed)) * 2 - 1
    weights = focus_weights(similarity, temperature=0.1)
    assert torch.allclose(weights.sum(1), torch.ones(6), atol=1e-5) and (weights >= 0).all()
    assert ((weights > 0).sum(1) < 50).all()  # sparse: most shared tokens get exactly zero


def test_focus_picks_the_identical_neighbour():
    tokens, dim = 50, 6
    vectors = torch.zeros(tokens, dim)
    vectors[:, 0] = 1.0
    vectors[: dim - 1, 1:] = 10 * torch.eye(dim - 1)  # five anchors in orthogonal directions
    vectors[40] = vectors[2]
    source = torch.randn(tokens, 8, generator=torch.Generator().manual_seed(0))
    helper = TokenVectors(vectors, torch.ones(tokens, dtype=torch.bool), "vectors", "planted")
    problem = _problem(source, [40], {token: token for token in range(dim - 1)}, helper)
    rows = _run("focus", problem, temperature=0.1)  # sharpened: the identical anchor alone
    assert torch.allclose(rows[0], source[2], atol=1e-5)
    # deepfocus' plain cosines (the default): the other anchors are at cosine 0.01, within sparsemax's unit margin,
    # so they keep a little weight; the identical one has the most
    weights = focus_weights(unit_rows(vectors[[40]]) @ unit_rows(vectors[: dim - 1]).T, temperature=1.0)
    assert int(weights.argmax()) == 2 and 0.5 < float(weights.max()) < 1
    assert torch.allclose(_run("focus", problem)[0], weights[0] @ source[: dim - 1], atol=1e-5)


def _plain_bpe(vocab: dict[str, int], merges: list[tuple[str, str]]):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=backend)


def test_merge_follows_the_merge_tree():
    target = _plain_bpe({"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4}, [("a", "b"), ("ab", "c")])
    source = torch.randn(3, 5, generator=torch.Generator().manual_seed(0))
    overlap = {0: 0, 1: 1, 2: 2}
    rows = _run("merge", _problem(source, [3, 4], overlap, None, None, target))
    ab = (source[0] + source[1]) / 2
    assert torch.allclose(rows[0], ab) and torch.allclose(rows[1], (ab + source[2]) / 2)
    assert not torch.allclose(rows[1], source.mean(0))  # not the flat mean of a, b, c


def test_align_weights_tokenizations_by_their_corpus_frequency(tmp_path):
    """Target 'abc' is (a, bc) in the source inside the word 'abc' and (xa, bc) inside 'xabc'."""
    source_tokenizer = _plain_bpe({"a": 0, "b": 1, "c": 2, "x": 3, "xa": 4, "bc": 5}, [("x", "a"), ("b", "c")])
    target_tokenizer = _plain_bpe({"a": 0, "b": 1, "c": 2, "x": 3, "ab": 4, "abc": 5}, [("a", "b"), ("ab", "c")])
    assert source_tokenizer.tokenize("xabc") == ["xa", "bc"] and target_tokenizer.tokenize("xabc") == ["x", "abc"]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("abc abc\nabc xabc\n", encoding="utf-8")
    source = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    overlap = {0: 0, 1: 1, 2: 2, 3: 3}
    problem = _problem(source, [4, 5], overlap, None, source_tokenizer, target_tokenizer, [str(corpus)])
    rows = _run("align", problem)
    # the authors' span rule: inside 'xabc' the source token 'xa' straddles the target 'abc', so only 'bc' aligns
    expected_abc = 0.75 * (source[0] + source[5]) / 2 + 0.25 * source[5]
    assert torch.allclose(rows[1], expected_abc, atol=1e-6)
    overlapping = _run("align", problem, spans="overlapping")  # every source token that touches 'abc'
    expected_abc = 0.75 * (source[0] + source[5]) / 2 + 0.25 * (source[4] + source[5]) / 2
    assert torch.allclose(overlapping[1], expected_abc, atol=1e-6)
    # 'ab' never occurs as a target token: it keeps its Merge row, the mean of a and b (here also its FVT row)
    assert torch.allclose(rows[0], (source[0] + source[1]) / 2, atol=1e-6)


def test_random_methods_follow_source_statistics():
    generator = torch.Generator().manual_seed(0)
    source = torch.randn(3000, 6, generator=generator) * torch.tensor([1, 2, 3, 1, 1, 1.0]) + 4
    source[:, 4] = source[:, 3] * 2  # a perfectly correlated pair of dimensions
    problem = _problem(source, list(range(2000)), {})
    for method in ("random", "multivariate"):
        rows = _run(method, problem)
        assert torch.allclose(rows.mean(0), source.mean(0), atol=0.2)
        assert torch.allclose(rows.std(0), source.std(0), rtol=0.1)
    correlated = _run("multivariate", problem)
    assert torch.corrcoef(correlated[:, 3:5].T)[0, 1] > 0.99
    assert abs(torch.corrcoef(_run("random", problem)[:, 3:5].T)[0, 1]) < 0.1
    picked = _run("random_token", problem)
    assert (picked.unsqueeze(1) == source.unsqueeze(0)).all(-1).any(1).all()  # every row is some source row


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.sampled_from([1.0, 10.0, 100.0]), k=st.sampled_from([2, 8, 64]))
def test_top_k_sparsemax_equals_full_sparsemax(seed, scale, k):
    from entmax import sparsemax

    from vocadapt.components.initializers._common import top_sparsemax

    scores = torch.randn(7, 120, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * scale
    values, indices = top_sparsemax(scores, k)
    rebuilt = torch.zeros_like(scores).scatter_(1, indices, values)
    assert torch.allclose(rebuilt, sparsemax(scores, dim=-1), atol=1e-12)


def test_top_k_sparsemax_pads_a_row_without_repeating_an_index():
    """Seed 3000: one row needs 3 of its scores, so every row is padded to 3 pairs; a row whose best score sits at
    column 0 had its weight 1 overwritten by a padding pair (index 0, weight 0) when scattered back."""
    from entmax import sparsemax

    from vocadapt.components.initializers._common import top_sparsemax

    scores = torch.randn(7, 120, generator=torch.Generator().manual_seed(3000), dtype=torch.float64) * 10.0
    values, indices = top_sparsemax(scores, 2)
    assert values.shape[1] == 3 and all(len(set(row.tolist())) == 3 for row in indices)
    rebuilt = torch.zeros_like(scores).scatter_(1, indices, values)
    assert torch.allclose(rebuilt, sparsemax(scores, dim=-1), atol=1e-12)
