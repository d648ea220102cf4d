"""fastText vectors for target tokens, trained on the corpus tokenized with the target tokenizer.

FOCUS ("0.01GB" §4.2) and SALT (§3 step 1) take similarities from fastText embeddings of the target tokens; the
"0.01GB" paper trains them on the target-language data tokenized with the target tokenizer, and finds that better
than off-the-shelf word vectors (its Appendix E.2). Each token is written as its stored string (``Ġcasa``,
``▁casa``), so fastText's character n-grams still relate ``Ġcasa`` and ``Ġcase``, and tokens that never occur
still get a vector from their n-grams.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import platform
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vocadapt.components.helpers.token_vectors import TokenVectors

_WHITESPACE = re.compile(r"\s")
# fastText splits words on whitespace; a token string holding one (an added token) gets this private-use character.
_SPACE_STAND_IN = "\ue000"


def token_words(target_tokenizer: Any) -> list[str | None]:
    """The word fastText sees for each target id (its stored string, whitespace replaced); None for non-ids."""
    vocab = target_tokenizer.backend_tokenizer.get_vocab(with_added_tokens=True)
    words: list[str | None] = [None] * (max(vocab.values(), default=-1) + 1)
    for piece, token_id in vocab.items():
        words[token_id] = _WHITESPACE.sub(_SPACE_STAND_IN, piece)
    return words


def write_token_corpus(target_tokenizer: Any, corpus_files: list[str], out_path: Path, max_lines: int) -> int:
    """Write the corpus as lines of token words; returns the number of tokens written."""
    from tqdm.auto import tqdm

    words = token_words(target_tokenizer)
    written, lines = 0, []
    for file in corpus_files:
        with open(file, encoding="utf-8") as handle:
            lines.extend(line.strip() for line in handle if line.strip())
        if len(lines) >= max_lines:
            break
    lines = lines[:max_lines]
    with open(out_path, "w", encoding="utf-8") as out:
        for start in tqdm(range(0, len(lines), 512), desc="fasttext: tokenizing corpus", leave=False):
            batch = target_tokenizer(lines[start : start + 512], add_special_tokens=False)["input_ids"]
            for ids in batch:
                out.write(" ".join(words[token_id] for token_id in ids if words[token_id]) + "\n")
                written += len(ids)
    return written


# glibc's mallopt parameter that fills each block malloc returns with (value XOR 0xFF), and each freed block with value
M_PERTURB = -6


@functools.lru_cache(maxsize=1)
def _glibc() -> ctypes.CDLL | None:
    """The C library when it is glibc (``platform.libc_ver`` reads the Python executable: once per process)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


@contextmanager
def zero_filled_allocations() -> Iterator[None]:
    """While inside, every block glibc's malloc hands out is filled with zeros (``mallopt(M_PERTURB, 0xFF)``).

    fastText with one thread initialises only the first tenth of its input matrix: ``DenseMatrix::uniform`` draws
    block ``i`` of ten in thread ``i`` and, below two threads, runs block 0 alone (fasttext-numpy2 0.10.4, as
    upstream). The other nine tenths (most word and n-gram rows) keep what the allocation held: its ``AlignedVector``
    does not clear memory. Fresh pages from the system are zeros, so a fresh process trained as expected; in a
    process that had freed large blocks before (the test suite, a long ``vocadapt adapt``), the same file and seed
    gave other vectors, or stopped with "Encountered NaN." Zero-filled allocations make every run start from the
    fresh-process matrix. Other C libraries (musl, macOS) are left as they are.
    """
    libc = _glibc()
    if libc is None:
        yield
        return
    libc.mallopt(M_PERTURB, 0xFF)
    try:
        yield
    finally:
        libc.mallopt(M_PERTURB, int(os.environ.get("MALLOC_PERTURB_") or 0))  # what the process started with


def train_seeded_fasttext(path: str, *, seed: int, **arguments: Any) -> Any:
    """``fasttext.train_unsupervised`` (skip-gram unless ``model`` says otherwise) with one thread and a seed: the
    same file and arguments give the same vectors, byte for byte, in any process.

    fasttext-numpy2 0.10.4's ``train_unsupervised`` rejects ``seed`` (its argument list omits it, though the C++
    ``args`` has the field and defaults it to 0), so the seed is set on the argument object the same way
    ``train_unsupervised`` builds it. One thread makes the result independent of scheduling; the matrix fastText
    leaves uninitialised starts at zero (:func:`zero_filled_allocations`). The fastText helper and the WECHSEL word
    models (``platform/assets/word_vectors.py``) both train here.
    """
    from fasttext import FastText

    values = {"input": path, "model": "skipgram", "thread": 1, "verbose": 0, **arguments}
    args, manually_set = FastText.read_args((), values, list(values), FastText.unsupervised_default)
    # fastText seeds std::minstd_rand, which treats 0 like 1: shift by one so seeds 0 and 1 differ.
    args["seed"] = seed + 1
    manually_set.add("seed")
    built = FastText._build_args(args, manually_set)
    model = FastText._FastText(args=built)
    with zero_filled_allocations():
        FastText.fasttext.train(model.f, built)
    model.set_args(model.f.getArgs())
    return model


@dataclass(frozen=True)
class FastTextSettings:
    """The helper's skip-gram: vector size ``dim``, passes ``epoch``, words seen fewer than ``min_count`` times
    dropped, character n-grams of ``minn`` to ``maxn``, context window ``ws``, and at most ``max_lines`` corpus lines
    (the helper's ``init.helper_options``)."""

    dim: int = 100
    epoch: int = 5
    min_count: int = 1
    minn: int = 3
    maxn: int = 6
    ws: int = 5
    max_lines: int = 500_000


def train_fasttext_helper(
    target_tokenizer: Any,
    corpus_files: list[str],
    settings: FastTextSettings = FastTextSettings(),
    *,
    seed: int = 0,
) -> TokenVectors:
    """Train skip-gram fastText on the tokenized corpus (one thread and a seed: deterministic) and return a vector
    for every target token. ``known`` is True for tokens seen in the corpus or with a non-zero n-gram vector."""
    dim, epoch, min_count = settings.dim, settings.epoch, settings.min_count
    if not corpus_files:
        raise ValueError(
            "the fasttext helper trains on target-language text and got no corpus files; pass the training "
            "corpus, or use helper 'model:DIR' / 'vectors:FILE.vec'"
        )
    with tempfile.TemporaryDirectory(prefix="vocadapt-fasttext-") as folder:
        corpus_path = Path(folder) / "tokens.txt"
        tokens = write_token_corpus(target_tokenizer, corpus_files, corpus_path, settings.max_lines)
        if tokens == 0:
            raise ValueError(f"the corpus {corpus_files} holds no text to train the fasttext helper on")
        model = train_seeded_fasttext(
            str(corpus_path), seed=seed, dim=dim, epoch=epoch, minCount=min_count, minn=settings.minn,
            maxn=settings.maxn, ws=settings.ws
        )
    words = token_words(target_tokenizer)
    vocabulary = set(model.words)
    vectors = np.zeros((len(words), dim), dtype=np.float32)
    for token_id, word in enumerate(words):
        if word is not None:
            vectors[token_id] = model.get_word_vector(word)
    seen = np.array([word is not None and word in vocabulary for word in words])
    known = torch.from_numpy(seen | (np.abs(vectors).sum(1) > 0))
    return TokenVectors(
        torch.from_numpy(vectors), known, "fasttext",
        f"fastText skip-gram dim={dim} epoch={epoch} min_count={min_count} seed={seed} on {tokens} target tokens "
        f"of {len(corpus_files)} file(s); {int(seen.sum())} tokens seen",
    )
