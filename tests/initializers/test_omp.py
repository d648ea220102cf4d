"""OMP: a planted sparse combination is recovered exactly, rows match a plain per-token reference of tokensurgeon's
algorithm, k is capped below the helper's dimension, and the LM head reuses the pursuit on its own rows."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vocadapt.components.errors import UserError
from vocadapt.components.helpers import TokenVectors
from vocadapt.components.initializers import InitProblem, get_initializer
from vocadapt.components.initializers.omp import batch_omp, effective_k


def _world(seed: int, shared: int = 200, new: int = 30, helper_dim: int = 64, hidden: int = 16):
    """Random helper vectors for shared + new tokens, random source rows for the shared ones (identity overlap)."""
    generator = torch.Generator().manual_seed(seed)
    helper_vectors = torch.randn(shared + new, helper_dim, generator=generator)
    source = torch.randn(shared, hidden, generator=generator)
    helper = TokenVectors(helper_vectors, torch.ones(shared + new, dtype=torch.bool), "vectors", "test")
    return helper, source, {token: token for token in range(shared)}, list(range(shared, shared + new))


def _problem(source, new_ids, overlap, helper, role="input"):
    return InitProblem(source_matrix=source, new_target_ids=torch.tensor(new_ids), overlap=overlap,
                       source_tokenizer=None, target_tokenizer=object(), helper=helper, role=role)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), sparsity=st.integers(1, 6), extra=st.integers(0, 4))
def test_omp_recovers_a_planted_sparse_combination(seed, sparsity, extra):
    """A new token whose helper vector is an exact combination of `sparsity` shared tokens' vectors gets exactly
    that combination of their source rows, also when k asks for more atoms than were planted.

    The shared vectors are orthogonal with norms from 0.5 to 2 (unnormalised, as tokensurgeon's atoms are): greedy
    selection is then guaranteed to find the planted atoms. With random Gaussian atoms it is not (hypothesis
    found a 6-sparse combination of 200 atoms in 64 dimensions that OMP, tokensurgeon's included, misses).
    """
    helper, source, overlap, new_ids = _world(seed, shared=60)
    generator = torch.Generator().manual_seed(seed + 1)
    directions, _ = torch.linalg.qr(torch.randn(64, 60, generator=generator))
    helper.vectors[:60] = directions.T * (0.5 + 1.5 * torch.rand(60, 1, generator=generator))
    support = torch.stack([torch.randperm(len(overlap), generator=generator)[:sparsity] for _ in new_ids])
    weights = (torch.rand(len(new_ids), sparsity, generator=generator) + 0.5) * torch.sign(
        torch.randn(len(new_ids), sparsity, generator=generator))
    helper.vectors[new_ids] = torch.einsum("ns,nsd->nd", weights, helper.vectors[support])
    rows = get_initializer("omp").function(_problem(source, new_ids, overlap, helper), k=sparsity + extra)
    expected = torch.einsum("ns,nsh->nh", weights, source[support])
    assert torch.allclose(rows, expected, atol=1e-4), (rows - expected).abs().max()


def _reference_omp(target: np.ndarray, atoms: np.ndarray, k: int) -> tuple[list[int], np.ndarray]:
    """tokensurgeon's algorithm written plainly, one token, float64: pick the unused atom with the largest
    |<residual, atom>|, refit the target on every atom picked so far by least squares, repeat k times."""
    chosen: list[int] = []
    residual = target.copy()
    coefficients = np.zeros(0)
    for _ in range(k):
        scores = np.abs(atoms @ residual)
        scores[chosen] = -np.inf
        chosen.append(int(np.argmax(scores)))
        coefficients = np.linalg.lstsq(atoms[chosen].T, target, rcond=None)[0]
        residual = target - atoms[chosen].T @ coefficients
    return chosen, coefficients


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_omp_rows_match_a_per_token_reference(seed):
    helper, source, overlap, new_ids = _world(seed, shared=120, new=25, helper_dim=64, hidden=12)
    k = 12
    rows = get_initializer("omp").function(_problem(source, new_ids, overlap, helper), k=k)
    atoms = helper.vectors[: len(overlap)].double().numpy()
    for row, token in zip(rows, new_ids):
        chosen, coefficients = _reference_omp(helper.vectors[token].double().numpy(), atoms, k)
        expected = coefficients @ source[chosen].double().numpy()
        np.testing.assert_allclose(row.double().numpy(), expected, rtol=1e-4, atol=1e-4)
    indices, _ = batch_omp(helper.vectors[new_ids[:1]], helper.vectors[: len(overlap)], k)
    assert indices[0].tolist() == _reference_omp(helper.vectors[new_ids[0]].double().numpy(), atoms, k)[0]


def test_the_default_k_adapts_and_an_explicit_k_is_used_as_written_or_refused():
    assert effective_k(None, 20_000, 4096) == 64 and effective_k(None, 20_000, 256) == 64  # donor models
    assert effective_k(None, 20_000, 100) == 25  # a 100-dimensional fastText helper: a quarter of its dimension
    assert effective_k(None, 10, 300) == 10 and effective_k(None, 5, 1) == 1
    assert effective_k(64, 20_000, 100) == 64  # written by the user: never capped
    helper, source, overlap, new_ids = _world(3, shared=150, helper_dim=16)
    # The default: 4 atoms in 16 dimensions, finite and bounded rows.
    rows = get_initializer("omp").function(_problem(source, new_ids, overlap, helper))
    assert torch.isfinite(rows).all() and rows.norm(dim=1).max() < 20 * source.norm(dim=1).mean()
    # k = 64 atoms in 16 dimensions would fit rounding after 16: refused with the reason, not capped.
    with pytest.raises(UserError, match="k=64.*16 dimensions"):
        get_initializer("omp").function(_problem(source, new_ids, overlap, helper), k=64)
    with pytest.raises(UserError, match="k=151.*150 shared tokens"):
        effective_k(151, 150, 4096)


def test_head_reuses_the_pursuit_with_its_own_rows_and_tokens_without_vectors_get_random_rows():
    helper, source, overlap, new_ids = _world(4)
    helper.known[new_ids[0]] = False
    head = torch.randn(source.shape, generator=torch.Generator().manual_seed(9))
    method = get_initializer("omp").function
    input_rows = method(_problem(source, new_ids, overlap, helper), k=8)
    head_rows = method(_problem(head, new_ids, overlap, helper, role="output"), k=8)
    indices, coefficients = batch_omp(helper.vectors[new_ids[1:]], helper.vectors[: len(overlap)], 8)
    assert torch.allclose(head_rows[1:], torch.einsum("nk,nkh->nh", coefficients, head[indices]), atol=1e-5)
    assert torch.allclose(input_rows[1:], torch.einsum("nk,nkh->nh", coefficients, source[indices]), atol=1e-5)
    assert torch.isfinite(input_rows[0]).all() and not torch.equal(input_rows[0], head_rows[0])


def test_omp_without_a_helper_or_with_k_below_one_is_refused():
    from vocadapt.components.initializers import MissingHelperError

    helper, source, overlap, new_ids = _world(5)
    with pytest.raises(MissingHelperError):
        get_initializer("omp").function(_problem(source, new_ids, overlap, None))
    with pytest.raises(ValueError, match="k >= 1"):
        get_initializer("omp").function(_problem(source, new_ids, overlap, helper), k=0)


def test_omp_rows_match_mergekit_batch_omp_on_a_tiny_case():
    """Reference rows written by mergekit's own batch_omp (data/make_omp_reference.py, mergekit @ a6e4028)."""
    import json
    from pathlib import Path

    reference = json.loads((Path(__file__).parent / "data" / "omp_tokensurgeon_reference.json").read_text())
    helper_vectors, source = torch.tensor(reference["helper"]), torch.tensor(reference["source"])
    shared = source.shape[0]
    helper = TokenVectors(helper_vectors, torch.ones(len(helper_vectors), dtype=torch.bool), "vectors", "reference")
    new_ids = list(range(shared, len(helper_vectors)))
    rows = get_initializer("omp").function(
        _problem(source, new_ids, {token: token for token in range(shared)}, helper), k=reference["k"])
    assert torch.allclose(rows, torch.tensor(reference["rows"]), atol=1e-4)
    indices, _ = batch_omp(helper_vectors[shared:], helper_vectors[:shared], reference["k"])
    assert indices.tolist() == reference["indices"]


def test_cli_init_omp_with_a_vectors_file(tmp_path, source_tokenizer, target_tokenizer, fasttext_helper):
    """`vocadapt init --method omp --helper vectors:FILE.vec`: the file is the donor space."""
    import json

    from typer.testing import CliRunner

    from tests.initializers.tiny_world import tiny_llama
    from vocadapt.cli.app import app
    from vocadapt.components.helpers.fasttext_helper import token_words

    tiny_llama(len(source_tokenizer), tied=False).save_pretrained(tmp_path / "source")
    source_tokenizer.save_pretrained(tmp_path / "source")
    target_tokenizer.save_pretrained(tmp_path / "target")
    words = token_words(target_tokenizer)
    known = [i for i, word in enumerate(words) if word and bool(fasttext_helper.known[i])]
    lines = [f"{len(known)} {fasttext_helper.vectors.shape[1]}"]
    lines += [words[i] + " " + " ".join(f"{v:.6f}" for v in fasttext_helper.vectors[i].tolist()) for i in known]
    (tmp_path / "helper.vec").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, [
        "init", "--source-model", str(tmp_path / "source"), "--target-tokenizer", str(tmp_path / "target"),
        "--out", str(tmp_path / "out"), "--method", "omp", "--helper", f"vectors:{tmp_path / 'helper.vec'}",
        "--option", "k=4",
    ])
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "out" / "vocadapt_init.json").read_text())
    assert record["options"] == {"k": 4} and "omp" in json.dumps(record) and "helper.vec" in json.dumps(record)
    assert record["effective_options"] == {"k": 4, "unseen": "random"}  # the defaults are recorded too
    adapted = CliRunner().invoke(app, [
        "init", "--source-model", str(tmp_path / "source"), "--target-tokenizer", str(tmp_path / "target"),
        "--out", str(tmp_path / "default-k"), "--method", "omp", "--helper", f"vectors:{tmp_path / 'helper.vec'}",
    ])
    assert adapted.exit_code == 0, adapted.output
    record = json.loads((tmp_path / "default-k" / "vocadapt_init.json").read_text())
    assert record["options"] == {}  # k left to adapt: the record shows the k the pursuit used
    assert isinstance(record["effective_options"]["k"], int) and record["effective_options"]["k"] >= 1


def test_a_sweep_over_omp_resolves_each_trial_and_refuses_it_without_a_helper_before_any_trial(tmp_path):
    """OMP as a sweep axis value, with its k as a second axis: every trial's config resolves to omp with that k
    (what the trial hands to the surgery); without a helper the sweep stops before any trial, naming the axis."""
    import json

    from vocadapt.components.errors import UserError
    from vocadapt.pipelines.preflight import resolve_methods
    from vocadapt.pipelines.sweep import check_methods
    from vocadapt.platform.sweeps.tune import load_sweep_config, trial_experiment, validate_sweep

    (tmp_path / "base.yaml").write_text(json.dumps({"name": "base", "target": {"language": "it"},
                                                    "init": {"helper": "fasttext"}}))
    (tmp_path / "sweep.yaml").write_text("name: s\nbase: base.yaml\nsearch_space:\n  init.methods: {grid: [fvt, omp]}\n"
                                         "  init.options.omp.k: {grid: [4, 16]}\n")
    sweep = load_sweep_config(tmp_path / "sweep.yaml")
    check_methods(sweep)
    trials = [trial_experiment(sweep.base_tree(), combination) for combination in validate_sweep(sweep)]
    resolved = [resolve_methods(trial) for trial in trials]
    omp_trials = [methods["omp"] for methods in resolved if "omp" in methods]
    assert sorted(method.options["k"] for method in omp_trials) == [4, 16]
    assert all(method.initializer is get_initializer("omp") and method.needs_helper for method in omp_trials)
    assert any(list(methods) == ["fvt"] for methods in resolved)
    (tmp_path / "base.yaml").write_text(json.dumps({"name": "base", "target": {"language": "it"},
                                                    "init": {"helper": None}}))
    with pytest.raises(UserError, match=r"search_space.init.methods: .*'omp' needs a helper.*init.helper: fasttext"):
        check_methods(load_sweep_config(tmp_path / "sweep.yaml"))


def test_unseen_fvt_gives_tokens_without_a_vector_their_fvt_rows(source_tokenizer, expanded_tokenizer, fasttext_helper):
    """unseen="fvt": a new token the helper has no vector for gets its FVT row, drawn from nothing; every other row
    is the pursuit's, as with the default (random rows for those tokens)."""
    import dataclasses

    from vocadapt.components.initializers._common import helper_rows
    from vocadapt.components.surgery import RowLayout, plan_vocabulary

    plan = plan_vocabulary(source_tokenizer, expanded_tokenizer, source_rows=len(source_tokenizer), layout=RowLayout("expand"))
    _, known = helper_rows(fasttext_helper, plan.new_target_ids)
    assert 0 < int((~known).sum()) < len(known)  # the helper was trained for another tokenizer: some ids lack one
    source = torch.randn(len(source_tokenizer), 16, generator=torch.Generator().manual_seed(2))
    problem = InitProblem(source, plan.new_target_ids, plan.target_to_source, source_tokenizer, expanded_tokenizer,
                          helper=fasttext_helper)
    method = get_initializer("omp").function
    default, with_fvt = method(problem, k=4), method(problem, k=4, unseen="fvt")
    fvt_rows = get_initializer("fvt").function(dataclasses.replace(problem, new_target_ids=plan.new_target_ids[~known]))
    assert torch.equal(with_fvt[~known], fvt_rows) and torch.equal(with_fvt[known], default[known])
    assert not torch.equal(default[~known], fvt_rows)
    with pytest.raises(ValueError, match=r"unseen random\|fvt, got 4 and .zero."):
        method(problem, k=4, unseen="zero")
