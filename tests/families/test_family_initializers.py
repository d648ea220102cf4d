"""Every initialiser on every family's real vocabulary, rows, padding and head, with the registry test's checks.

What runs (the source matrices are seeded random bf16, ``family_surgery_world.seeded_matrix``):

- every registered method on each family: Mistral-7B-v0.1 (32,000 rows, untied), Llama-2-7B (32,000, untied),
  Llama-3.1-8B (128,256, untied, new ids past the source rows), Qwen3-8B (151,936, untied, new ids past its padding
  rows), Gemma-3-4B (262,208, tied, padded) and DeepSeek-V3 (129,280, untied, new ids inside its padding), each in
  both modes: the tokenizer expanded by 300 Italian tokens (``expand_with_top_k``), and replaced by an Italian
  tokenizer trained like it (2,000 tokens; 8,192 for Gemma-3, whose 6,415 added tokens it keeps); in memory through
  ``adapt_embeddings`` (the adapt pipeline's path). Each test runs at a width: ``hidden16``, the
  family's real rows at hidden size 16 (what the vocabulary, padding, head and specials need), and ``real``, the
  family's real hidden size too (4,096; 2,560 for Gemma-3; 7,168 for DeepSeek-V3). By default every method runs at
  the real width on Llama-3.1-8B (the shape most adapted; at hidden 16 it would repeat the same vocabulary's checks)
  and at hidden 16 on every other family, and fvt at the real width on every family (their real matrices through
  the in-memory path); ``VOCADAPT_FAMILY_WIDTH=real`` runs every test
  at the real width too (about 14 minutes of test time, against about 5 by default:
  ``docs/benchmarks/initialisers.md``). On Llama-3.1 at its real width the methods that draw random numbers run
  twice (same bytes). One family's matrices are held at a time (DeepSeek-V3's: 3.7 GB of bf16); rows are compared
  as slices a block at a time;
- the checkpoint path (``adapt_checkpoint``, streamed in bounded memory, what ``vocadapt init`` runs) on an
  embedding-only checkpoint in the family's real shape: Mistral-7B-v0.1 expanded (sava); Gemma-3 (262,208 x 2,560,
  tied, padded past 262,145 ids) replaced by an 8,192-token Italian tokenizer trained like it (random_token).

The streamed path of Llama-3.1, Qwen3 and DeepSeek-V3 is not run here (each streamed run writes the checkpoint and
the whole adapted pair, 2.1 to 3.7 GB of disk each): ``tests/initializers/test_bounded_memory.py`` checks every
method's streamed bytes against the whole-matrix path at small size, and ``benchmarks/init_scale_families.py`` runs
it at any family's shape. What padding does in expansion is also ``test_family_model_fit.py``'s, on the real rows
at hidden size 8. Helper methods (clp, focus, omp, salt, sava) read a tiny helper model that uses the target tokenizer
(``helper_model_dir``), wechsel the registry test's tiny fastText models and dictionary.
"""

from __future__ import annotations

import functools
import os

import pytest
import torch

from tests.families import family_surgery_world as world
from tests.families.conftest import FAMILIES
from tests.initializers.test_registry import OPTIONS
from vocadapt.components.initializers import available_initializers, get_initializer
from vocadapt.components.surgery import Initialisation, RowLayout, adapt_checkpoint, adapt_embeddings, plan_vocabulary
from vocadapt.components.surgery.checkpoint import CheckpointWriting
from vocadapt.platform.families.catalogue import model_family

METHODS = available_initializers()
# Gemma-3's tokenizer carries 6,415 added tokens (image soft tokens, reserved ones) that a target trained like it
# keeps, so its target needs more than 6,671 tokens
TARGET_SIZES = {"gemma3": 8192}
# Run twice at Llama-3.1's real width (same seed, same bytes): the methods that draw random numbers. The rest are
# functions of the tokenizers and matrices, and every method's determinism is checked at small size by the registry
# test. Multivariate draws too, but a second 4,096-wide covariance costs ~10 s.
SEEDED_DRAWS = ("random", "random_token")
# What a method is given at the real width besides the registry test's options: multivariate's covariance from 8,192
# sampled source rows (two of its 4,096-row reads) instead of its default 32,768. The same code at a quarter of the
# products: at Llama-3.1's width its replace test took 10.3 s alone before, 3.7 s after
# (docs/benchmarks/test-suite.md).
REAL_WIDTH_OPTIONS = {"multivariate": {"max_rows": 8192}}


def embedding_only_model(name: str, source_input: torch.Tensor, source_output: torch.Tensor | None):
    """The family's architecture class with no layers (built on the meta device), holding the given input
    embeddings and, when untied, the given LM head: what surgery reads and replaces, at the real shape."""
    from transformers import AutoConfig, AutoModelForCausalLM

    architecture = dict(model_family(name).architecture)
    model_type = architecture.pop("model_type")
    architecture.pop("class")
    architecture["num_hidden_layers"] = 0
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **architecture))
    model.set_input_embeddings(torch.nn.Embedding.from_pretrained(source_input, freeze=False))
    if source_output is None:
        model.tie_weights()
    else:
        model.lm_head.weight = torch.nn.Parameter(source_output)
    return model


@functools.lru_cache(maxsize=2)  # the family's two targets (read every test: 0.2 s for Gemma-3's vocabulary)
def special_pairs(source_tokenizer, target_tokenizer) -> list[tuple[int, int]]:
    """(source id, target id) of every special token of the source that the target has."""
    vocabulary = target_tokenizer.get_vocab()
    pairs = []
    for token in source_tokenizer.all_special_tokens:
        if token in vocabulary:
            pairs.append((source_tokenizer.convert_tokens_to_ids(token), vocabulary[token]))
    return pairs


# The widths a test runs at: "hidden16", the family's real rows at hidden size 16, and "real", its real hidden size
# too (families.yaml's model). By default every method runs on Llama-3.1 at its real width and at hidden 16 on every
# other family (Llama-3.1 at hidden 16 too repeated the real width's checks on the same vocabulary: 24 tests, about
# 24 s), and fvt on every family at its real width; VOCADAPT_FAMILY_WIDTH=real runs every method on every family at
# its real width (the full run: about 14 minutes of test time on two cores, docs/benchmarks/initialisers.md).
NARROW = 16
EVERY_FAMILY_AT_REAL_WIDTH = os.environ.get("VOCADAPT_FAMILY_WIDTH") == "real"
EVERY_METHOD_AT_REAL_WIDTH = "llama3_1"  # the shape most adapted: 128,256 x 4,096, untied
AT_REAL_WIDTH_ON_EVERY_FAMILY = "fvt"
AT_HIDDEN16 = [name for name in FAMILIES if EVERY_FAMILY_AT_REAL_WIDTH or name != EVERY_METHOD_AT_REAL_WIDTH]


@pytest.fixture(scope="module", params=FAMILIES)
def family_world(request, family_tokenizers):
    """A family's tokenizer, both targets with their helpers (the tokenizer expanded by 300 Italian tokens, and an
    Italian tokenizer trained like it: the replacement), each target's vocabulary plan, and ``matrices(width)``: the
    source matrices at the family's real rows (no LM head for a tied family), built on first use. Module-scoped and
    parametrised: pytest runs one family's tests (every width, expanded and replaced), drops its matrices, then
    builds the next's, so only one family's (3.7 GB for DeepSeek-V3 at its real width) are held at a time."""
    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

    name = request.param
    family_dir = str(family_tokenizers[name])
    expanded = world.expanded_tokenizer_dir(name, family_dir)
    replacement = world.target_tokenizer_dir(name, family_dir, TARGET_SIZES.get(name, 2000))
    family = model_family(name)
    source = load_pretrained_tokenizer(family_dir)
    targets = {"expand": (load_pretrained_tokenizer(str(expanded)), world.helper_model_dir(expanded)),
               "replace": (load_pretrained_tokenizer(str(replacement)), world.helper_model_dir(replacement))}
    built: dict[str, tuple[torch.Tensor, torch.Tensor | None]] = {}

    def matrices(width: str) -> tuple[torch.Tensor, torch.Tensor | None]:
        if width not in built:
            hidden = family.architecture["hidden_size"] if width == "real" else NARROW
            built[width] = (world.seeded_matrix(family.vocab_rows, hidden, seed=0),
                            None if family.tied else world.seeded_matrix(family.vocab_rows, hidden, seed=1))
        return built[width]

    plans = {mode: plan_vocabulary(source, target, source_rows=family.vocab_rows, layout=RowLayout(mode))
             for mode, (target, _) in targets.items()}
    return dict(name=name, source=source, targets=targets, plans=plans, matrices=matrices)


CHECK_ROWS = 8192  # rows compared at once: whole-matrix gathers at Llama-3.1's shape would add GBs to the peak


def row_runs(new_ids: torch.Tensor, old_ids: torch.Tensor) -> list[tuple[int, int, int]]:
    """(first new id, first old id, length) of each stretch where both id lists step by one: those rows compare as
    slices of the matrices (views), not as gathered copies. Expansion keeps ~128K source rows in one or two runs."""
    if len(new_ids) == 0:
        return []
    steps = (torch.diff(new_ids) != 1) | (torch.diff(old_ids) != 1)
    starts = [0] + (torch.nonzero(steps).squeeze(1) + 1).tolist() + [len(new_ids)]
    return [(int(new_ids[a]), int(old_ids[a]), b - a) for a, b in zip(starts[:-1], starts[1:])]


def assert_rows_equal(new: torch.Tensor, new_ids: torch.Tensor, old: torch.Tensor, old_ids: torch.Tensor) -> None:
    """new[new_ids] == old[old_ids] bit for bit, compared a block of rows at a time."""
    for new_first, old_first, length in row_runs(new_ids, old_ids):
        for offset in range(0, length, CHECK_ROWS):
            count = min(CHECK_ROWS, length - offset)
            assert torch.equal(new[new_first + offset : new_first + offset + count],
                               old[old_first + offset : old_first + offset + count]), f"rows {new_first + offset}.. differ"


def check_adapted(model, plan, source_input, source_output, source, target):
    """Shape, shared rows copied bit for bit (embeddings and untied head), specials' rows kept, the config's
    vocab_size covering every id, (expansion) every source row kept at its id, and finite values in the rows nothing
    was copied to; row blocks at a time. Under expansion the shared ids are the source's own, so the kept rows
    include them and are compared once."""
    new_input = model.get_input_embeddings().weight.detach()
    new_output = model.get_output_embeddings().weight.detach()
    hidden = source_input.shape[1]
    assert new_input.shape == (plan.rows, hidden) and new_output.shape == (plan.rows, hidden)
    assert new_input.dtype == source_input.dtype == torch.bfloat16
    assert model.config.vocab_size == plan.rows >= len(target)
    shared = sorted(plan.target_to_source.items())
    targets, sources = torch.tensor([t for t, _ in shared]), torch.tensor([s for _, s in shared])
    matrices = [(new_input, source_input)] + ([] if source_output is None else [(new_output, source_output)])
    copied = torch.zeros(plan.rows, dtype=torch.bool)
    if plan.mode == "expand":
        assert torch.equal(targets, sources), "expansion keeps every shared token at its source id"
        kept = torch.ones(source_input.shape[0], dtype=torch.bool)
        kept[plan.new_target_ids[plan.new_target_ids < source_input.shape[0]]] = False
        kept_ids = torch.nonzero(kept).squeeze(1)
        for new, old in matrices:
            assert_rows_equal(new, kept_ids, old, kept_ids)
        copied[kept_ids] = True
    else:
        for new, old in matrices:
            assert_rows_equal(new, targets, old, sources)
        copied[targets] = True
    if source_output is not None:
        assert not torch.equal(new_output[plan.new_target_ids], new_input[plan.new_target_ids])
    for new, _ in matrices:
        assert torch.isfinite(new[~copied]).all()  # copied rows equal the finite source rows
    pairs = special_pairs(source, target)
    assert pairs, "the family's specials are in the target"
    for new, old in matrices:
        for source_id, target_id in pairs:
            assert torch.equal(new[target_id], old[source_id]), (source_id, target_id)
        assert (new[plan.new_target_ids].float().abs().sum(dim=1) > 0).all(), "every new row is set"
    # the config names the target tokenizer's ids; Qwen3's tokenizer has no BOS (its text starts without one)
    assert model.config.bos_token_id == target.bos_token_id
    assert (target.bos_token_id is None) == (source.bos_token_id is None)
    assert model.config.eos_token_id == target.eos_token_id is not None
    if plan.mode == "expand":
        assert (target.bos_token_id, target.eos_token_id) == (source.bos_token_id, source.eos_token_id)


def _adapt_family(family_world, method: str, mode: str, width: str):
    """The embedding-only model adapted by one method to the family's ``mode`` target at ``width``, given the
    overlap and new ids as the adapt pipeline gives them (``Recipe``: the fixture's plan, computed once)."""
    from vocadapt.components.helpers import resolve_helper

    target, helper_dir = family_world["targets"][mode]
    plan = family_world["plans"][mode]
    helper = None
    if get_initializer(method).needs_helper:
        helper = resolve_helper(f"model:{helper_dir}", target_tokenizer=target)
    model = embedding_only_model(family_world["name"], *family_world["matrices"](width))
    options = {**OPTIONS.get(method, {}), **(REAL_WIDTH_OPTIONS.get(method, {}) if width == "real" else {})}
    adapt_embeddings(model, Initialisation(method, options=options or None, seed=3, helper=helper,
                                           corpus_files=[world.italian_corpus_file()]),
                     source_tokenizer=family_world["source"], target_tokenizer=target,
                     layout=RowLayout(mode, target_to_source=plan.target_to_source, new_target_ids=plan.new_target_ids))
    return model


def check_method(family_world, method: str, mode: str, width: str, *, twice: bool = False) -> None:
    """One method adapted to the family's ``mode`` target at ``width``, checked (``check_adapted``; in expansion
    every source token kept, in replacement the matrices cut to the target's size); ``twice``: adapted again, the
    same new rows bit for bit."""
    name, source, (target, _) = family_world["name"], family_world["source"], family_world["targets"][mode]
    plan = family_world["plans"][mode]
    if mode == "expand":
        assert len(plan.new_target_ids) == len(target) - len(source) > 250
    else:
        assert plan.rows == len(target) == TARGET_SIZES.get(name, 2000) < len(source)
        assert 0 < len(plan.new_target_ids) < len(target) and len(plan.target_to_source) > 100
    model = _adapt_family(family_world, method, mode, width)
    check_adapted(model, plan, *family_world["matrices"](width), source, target)
    if not twice:
        return
    first = (model.get_input_embeddings().weight[plan.new_target_ids], model.get_output_embeddings().weight[plan.new_target_ids])
    del model  # the second run's matrices replace the first's
    again = _adapt_family(family_world, method, mode, width)
    assert torch.equal(again.get_input_embeddings().weight[plan.new_target_ids], first[0])
    assert torch.equal(again.get_output_embeddings().weight[plan.new_target_ids], first[1])


@pytest.mark.parametrize("mode", ("expand", "replace"))
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("family_world", AT_HIDDEN16, indirect=True)
def test_every_method_on_every_family(method, mode, family_world):
    """Expanded: every source token keeps its id and rows, 300 Italian tokens get new ones. Replaced by an Italian
    tokenizer trained like the family's (2,000 tokens; 8,192 for Gemma-3): the matrices shrink to the target's
    size, shared tokens bring their source rows, specials keep theirs. At hidden 16 on every family but Llama-3.1,
    which test_every_method_at_llama3_1s_real_width covers (every family at the real width with
    VOCADAPT_FAMILY_WIDTH=real)."""
    check_method(family_world, method, mode, "real" if EVERY_FAMILY_AT_REAL_WIDTH else "hidden16")


@pytest.mark.skipif(EVERY_FAMILY_AT_REAL_WIDTH, reason="test_every_method_on_every_family runs at the real width")
@pytest.mark.parametrize("mode", ("expand", "replace"))
def test_each_family_at_its_real_width(mode, family_world):
    """fvt on the family's real matrices (DeepSeek-V3's 129,280 x 7,168 untied, Gemma-3's 262,208 x 2,560 tied):
    the real shape through the in-memory path, rows compared bit for bit."""
    check_method(family_world, AT_REAL_WIDTH_ON_EVERY_FAMILY, mode, "real")


@pytest.mark.skipif(EVERY_FAMILY_AT_REAL_WIDTH, reason="test_every_method_on_every_family runs at the real width")
@pytest.mark.parametrize("mode", ("expand", "replace"))
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("family_world", [EVERY_METHOD_AT_REAL_WIDTH], indirect=True)
def test_every_method_at_llama3_1s_real_width(method, mode, family_world):
    """Every method on Llama-3.1-8B's real matrices (128,256 x 4,096, untied, new ids past the source rows); those
    that draw random numbers run twice in expansion (same bytes)."""
    check_method(family_world, method, mode, "real", twice=mode == "expand" and method in SEEDED_DRAWS)


def check_checkpoint(out, record, name: str, source, target, mode: str):
    """The adapted checkpoint read a block of rows at a time against the seeded source (never loaded whole)."""
    import json

    family = model_family(name)
    hidden, source_rows = family.architecture["hidden_size"], family.vocab_rows
    config = json.loads((out / "config.json").read_text())
    assert config["vocab_size"] == record["rows"] >= len(target)
    assert (config["bos_token_id"], config["eos_token_id"]) == (target.bos_token_id, target.eos_token_id)
    if mode == "expand":
        assert (target.bos_token_id, target.eos_token_id) == (source.bos_token_id, source.eos_token_id)
    tensors = ["model.embed_tokens.weight"] + ([] if family.tied else ["lm_head.weight"])
    assert record["tied"] == family.tied and sorted(record["tensors"].values()) == sorted(tensors)
    new_ids = {start + offset for start, end in record["new_id_ranges"] for offset in range(end - start)}
    plan = plan_vocabulary(source, target, source_rows=source_rows, layout=RowLayout(mode))
    assert len(new_ids) == record["initialised"] == len(plan.new_target_ids)
    for seed, tensor in enumerate(tensors):
        rows_seen = 0
        for first, block in world.row_blocks(out, tensor):
            assert block.shape[1] == hidden and block.dtype == torch.bfloat16
            assert torch.isfinite(block.float()).all()
            rows_seen += block.shape[0]
            if mode == "expand":  # every source row but those the new ids took is kept, padding rows included
                ids = [i for i in range(first, min(first + block.shape[0], source_rows)) if i not in new_ids]
                if ids:
                    assert torch.equal(block[torch.tensor(ids) - first], world.seeded_rows(ids, hidden, seed=seed))
        assert rows_seen == record["rows"]
        targets = sorted(plan.target_to_source)
        sources = [plan.target_to_source[i] for i in targets]
        sample = slice(None, None, max(1, len(targets) // 2000))  # shared rows: a spread of 2,000 of them
        assert torch.equal(world.read_rows(out, tensor, targets[sample]),
                           world.seeded_rows(sources[sample], hidden, seed=seed))
        for source_id, target_id in special_pairs(source, target):
            assert torch.equal(world.read_rows(out, tensor, [target_id]), world.seeded_rows([source_id], hidden, seed=seed))
        new_rows = world.read_rows(out, tensor, sorted(new_ids))
        assert (new_rows.float().abs().sum(dim=1) > 0).all()


# (family, mode, methods): one checkpoint per family, each method adapting it in turn (sava streams by rows,
# random_token by column blocks).
STREAMED = [
    ("mistral_v1", "expand", ("sava",)),
    ("gemma3", "replace", ("random_token",)),
]


@pytest.mark.parametrize("name, mode, methods", STREAMED, ids=[name for name, _, _ in STREAMED])
def test_checkpoint_surgery_at_the_real_shape(name, mode, methods, family_tokenizers, tmp_path):
    """``adapt_checkpoint`` (streamed) on an embedding-only checkpoint of the family's real shape: untied Mistral,
    Llama-3.1, Qwen3 (its new ids past its padding rows) and DeepSeek-V3 (7,168 wide, new ids inside its padding)
    expanded; Gemma-3 tied and padded, replaced. Helper methods read a helper model given as ``model:DIR``."""
    import shutil

    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

    source_dir = world.write_family_checkpoint(tmp_path / "source", name, family_tokenizers[name])
    target_dir = (world.expanded_tokenizer_dir(name, str(family_tokenizers[name])) if mode == "expand"
                  else world.target_tokenizer_dir(name, str(family_tokenizers[name]), TARGET_SIZES.get(name, 2000)))
    source = load_pretrained_tokenizer(str(family_tokenizers[name]))
    target = load_pretrained_tokenizer(str(target_dir))
    for method in methods:
        helper = f"model:{world.helper_model_dir(target_dir)}" if get_initializer(method).needs_helper else None
        record = adapt_checkpoint(source_dir, target_dir, tmp_path / "out",
                                  Initialisation(method, seed=3, helper=helper, corpus_files=[world.italian_corpus_file()]),
                                  layout=RowLayout(mode), writing=CheckpointWriting(link="symlink"))
        assert record["streamed"] and record["method"] == method
        check_checkpoint(tmp_path / "out", record, name, source, target, mode)
        shutil.rmtree(tmp_path / "out")  # the next method's output in its place (GBs each)
