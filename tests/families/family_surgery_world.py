"""What the family surgery tests share, built once per test process (plain cached functions, so the initialiser and
the model-fit tests reuse one expansion per family): Italian lines, auxiliary tokenizers, each family's real
tokenizer expanded by a few hundred Italian tokens, and embedding-only checkpoints in a family's real shape."""

from __future__ import annotations

import atexit
import itertools
import json
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

import torch

from vocadapt.platform.families.catalogue import model_family

NEW_TOKENS = 300  # expansion size: a few hundred Italian tokens keep every family's test in seconds
LINES = 3000  # Italian lines the auxiliary tokenizers are trained on
_WORK = Path(tempfile.mkdtemp(prefix="vocadapt-family-surgery-"))
atexit.register(shutil.rmtree, _WORK, ignore_errors=True)  # 250 MB of tokenizers and checkpoints a test process


@lru_cache(maxsize=1)
def italian_lines() -> tuple[str, ...]:
    from vocadapt.platform.assets.embedded import build_assets

    train = build_assets(languages=("it",)).home / "corpora" / "it" / "train.txt"
    with open(train, encoding="utf-8") as handle:
        return tuple(itertools.islice((line.strip() for line in handle if line.strip()), LINES))


@lru_cache(maxsize=1)
def italian_corpus_file() -> str:
    path = _WORK / "it-train.txt"
    path.write_text("\n".join(italian_lines()) + "\n", encoding="utf-8")
    return str(path)


def tokenizer_dir(kind: str, vocab_size: int = 2000) -> Path:
    """An Italian tokenizer of ``kind`` (bytelevel-bpe or spm-bpe) trained on the lines: the expansion's auxiliary
    tokenizer, or a small replacement target."""
    return _tokenizer_dir(kind, vocab_size)  # one cache key however the size is given (or left out)


@lru_cache(maxsize=None)
def _tokenizer_dir(kind: str, vocab_size: int) -> Path:
    from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, train_tokenizer_from_iterator

    out = _WORK / f"italian-{kind}-{vocab_size}"
    train_tokenizer_from_iterator(iter(italian_lines()), TokenizerTrainingSpec(kind, vocab_size),
                                  out, show_progress=False)
    return out


def expanded_tokenizer_dir(name: str, family_dir: str | Path) -> Path:
    """The family's real tokenizer expanded with the ``NEW_TOKENS`` most frequent new tokens of an Italian
    tokenizer trained like the family (``expand_with_top_k``), saved to a folder."""
    return _expanded_tokenizer_dir(name, str(family_dir))  # a Path and its str: one cache key, one folder


@lru_cache(maxsize=None)
def _expanded_tokenizer_dir(name: str, family_dir: str) -> Path:
    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer
    from vocadapt.components.tokenizers.expand import expand_with_top_k
    from vocadapt.components.tokenizers.saving import save_tokenizer

    source = load_pretrained_tokenizer(family_dir)
    auxiliary = load_pretrained_tokenizer(str(tokenizer_dir(model_family(name).tokenizer_kind)))
    expansion = expand_with_top_k(source, auxiliary, list(italian_lines()[:1000]), NEW_TOKENS)
    out = _WORK / f"{name}-expanded"
    save_tokenizer(expansion.tokenizer, out)
    return out


POOL_ROWS = 4096


def seeded_blocks(rows: int, hidden: int, dtype: torch.dtype = torch.bfloat16, seed: int = 0):
    """A seeded random (rows, hidden) matrix as consecutive blocks of ``POOL_ROWS`` rows: ``POOL_ROWS`` Gaussian
    rows (std 0.02), the k-th block of them rolled by k columns, so every row differs from every other while only
    4,096 rows are drawn (torch.randn of a 2.5 GB pair of Qwen3 matrices takes over a minute on a busy 2-core
    machine; the rolls are copies)."""
    generator = torch.Generator().manual_seed(seed)
    pool = (torch.randn(POOL_ROWS, hidden, generator=generator) * 0.02).to(dtype)
    for index, first in enumerate(range(0, rows, POOL_ROWS)):
        yield torch.roll(pool, shifts=index % hidden, dims=1)[: min(POOL_ROWS, rows - first)]


def seeded_matrix(rows: int, hidden: int, dtype: torch.dtype = torch.bfloat16, seed: int = 0) -> torch.Tensor:
    """The blocks of :func:`seeded_blocks` in one matrix, filled in place (a concatenation held the blocks and the
    matrix at once: twice its size)."""
    out = torch.empty(rows, hidden, dtype=dtype)
    for index, block in enumerate(seeded_blocks(rows, hidden, dtype, seed)):
        out[index * POOL_ROWS : index * POOL_ROWS + block.shape[0]] = block
    return out


def helper_model_dir(target_tokenizer_dir: Path, hidden: int = 32, seed: int = 0) -> Path:
    """A tiny helper model that uses the target tokenizer (what clp, sava and salt read): its input embeddings
    (len(target) x ``hidden``, seeded random) and the target tokenizer; no body, as the helper reads only those."""
    from safetensors.torch import save_file
    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

    out = Path(target_tokenizer_dir).with_name(Path(target_tokenizer_dir).name + "-helper")
    if not out.exists():
        size = len(load_pretrained_tokenizer(str(target_tokenizer_dir)))
        shutil.copytree(target_tokenizer_dir, out)
        save_file({"model.embed_tokens.weight": seeded_matrix(size, hidden, torch.float32, seed)},
                  str(out / "model.safetensors"))
    return out


def write_family_checkpoint(folder: Path, name: str, tokenizer_dir: Path, *, hidden: int | None = None,
                            rows: int | None = None, dtype: torch.dtype = torch.bfloat16, seed: int = 0) -> Path:
    """A checkpoint folder in family ``name``'s shape with no body: config.json written by transformers' config
    class from the catalogue (``hidden`` and ``rows`` override the real width and vocab_size), the tokenizer, and
    ``model.safetensors`` holding the input embeddings and, for an untied family, the LM head (seeded random,
    written a block of rows at a time so a 7,168-wide matrix never sits in memory whole)."""
    from transformers import AutoConfig

    from vocadapt.components.surgery.streaming import ShardWriter

    family = model_family(name)
    architecture = dict(family.architecture)
    model_type = architecture.pop("model_type")
    architecture.pop("class")
    architecture["hidden_size"] = hidden = hidden or architecture["hidden_size"]
    architecture["vocab_size"] = rows = rows or architecture["vocab_size"]
    folder.mkdir(parents=True)
    AutoConfig.for_model(model_type, **architecture).to_json_file(str(folder / "config.json"))
    for path in Path(tokenizer_dir).iterdir():
        shutil.copyfile(path, folder / path.name)
    names = ["model.embed_tokens.weight"] + ([] if family.tied else ["lm_head.weight"])
    writer = ShardWriter(folder / "model.safetensors", [(tensor, dtype, (rows, hidden)) for tensor in names])
    for index, _ in enumerate(names):  # the head from its own seed: its rows differ from the embeddings'
        for block in seeded_blocks(rows, hidden, dtype, seed + index):
            writer.write(block)
    writer.close()
    return folder


def read_rows(folder: Path, tensor: str, ids) -> torch.Tensor:
    """Rows ``ids`` of one tensor of a single-file or sharded checkpoint, read without loading the tensor."""
    from safetensors import safe_open

    index = folder / "model.safetensors.index.json"
    shard = json.loads(index.read_text())["weight_map"][tensor] if index.exists() else "model.safetensors"
    ids = torch.as_tensor(ids, dtype=torch.long)
    with safe_open(str(folder / shard), framework="pt") as handle:
        matrix = handle.get_slice(tensor)
        return torch.stack([matrix[int(i) : int(i) + 1][0] for i in ids]) if len(ids) else torch.empty(0)


def row_blocks(folder: Path, tensor: str, block_rows: int = 8192):
    """(first row, block) over one tensor of a checkpoint, a block of rows at a time."""
    from safetensors import safe_open

    index = folder / "model.safetensors.index.json"
    shard = json.loads(index.read_text())["weight_map"][tensor] if index.exists() else "model.safetensors"
    with safe_open(str(folder / shard), framework="pt") as handle:
        matrix = handle.get_slice(tensor)
        rows = matrix.get_shape()[0]
        for first in range(0, rows, block_rows):
            yield first, matrix[first : first + block_rows]


def seeded_rows(ids, hidden: int, dtype: torch.dtype = torch.bfloat16, seed: int = 0) -> torch.Tensor:
    """Rows ``ids`` of :func:`seeded_matrix` without building it."""
    generator = torch.Generator().manual_seed(seed)
    pool = (torch.randn(POOL_ROWS, hidden, generator=generator) * 0.02).to(dtype)
    return torch.stack([torch.roll(pool[int(i) % POOL_ROWS], shifts=(int(i) // POOL_ROWS) % hidden, dims=0)
                        for i in ids]) if len(ids) else torch.empty(0, hidden, dtype=dtype)


def target_tokenizer_dir(name: str, family_dir: str | Path, vocab_size: int = 2000) -> Path:
    """A small Italian replacement target trained like the family (its kind, specials and chat template)."""
    # lru_cache keys ``f(a, b)`` and ``f(a, b, 2000)`` apart: a second build into the same folder was refused when
    # the initialiser and model-fit files ran in one worker (CI of a1e9731), so the cache sees the size always given
    return _target_tokenizer_dir(name, str(family_dir), vocab_size)


@lru_cache(maxsize=None)
def _target_tokenizer_dir(name: str, family_dir: str, vocab_size: int) -> Path:
    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer
    from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, train_tokenizer_from_iterator

    out = _WORK / f"{name}-italian-{vocab_size}"
    spec = TokenizerTrainingSpec(model_family(name).tokenizer_kind, vocab_size,
                                 like=load_pretrained_tokenizer(family_dir))
    train_tokenizer_from_iterator(iter(italian_lines()), spec, out, show_progress=False)
    return out
