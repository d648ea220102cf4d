"""What llama.cpp itself does with an exported GGUF, through llama-cpp-python: its token ids, its greedy tokens and
its bits per byte. The export's tests and ``benchmarks/gguf_export.py`` compare these with transformers.

Greedy decoding reads llama.cpp's logits and takes the arg-max (no sampler settings between the two sides).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np


def load_gguf(path: Path, n_ctx: int = 512, threads: int = 2, logits_all: bool = True):
    """llama.cpp's model and context for ``path``; ``logits_all`` keeps every position's logits (bits per byte).

    Loaded without ggml's extra CPU buffer types (``use_extra_bufts``: the AMX and repacked weight layouts): built
    for a Sapphire Rapids CPU (AMX_INT8), llama-cpp-python 0.3.36 crashes with a segmentation fault on a batched
    ``eval`` of a q8_0 model with them, SmolLM2-135M's and a 32-wide test model's alike. The plain CPU kernels give
    the same logits (seen on that model at batch 1, where the extra types are not used)."""
    from llama_cpp import Llama

    with _without_extra_buffer_types():
        return Llama(model_path=str(path), n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
                     logits_all=logits_all, verbose=False, seed=0)


@contextmanager
def _without_extra_buffer_types():
    """``Llama(...)`` takes its model parameters from ``llama_model_default_params()`` and offers no argument for
    ``use_extra_bufts``; while this block runs, those defaults have it off."""
    import llama_cpp.llama as llama_module

    low_level = llama_module.llama_cpp
    defaults = low_level.llama_model_default_params

    def without_extra_buffer_types():
        params = defaults()
        params.use_extra_bufts = False
        return params

    with _DEFAULTS_LOCK:
        low_level.llama_model_default_params = without_extra_buffer_types
        try:
            yield
        finally:
            low_level.llama_model_default_params = defaults


_DEFAULTS_LOCK = threading.Lock()


def load_vocabulary(path: Path):
    """llama.cpp's tokenizer for ``path`` alone (no weights read)."""
    from llama_cpp import Llama

    return Llama(model_path=str(path), vocab_only=True, verbose=False)


# Text that every export's tokenizer check tokenizes, beside text made of the vocabulary's own tokens: Italian and
# English prose, accents, apostrophes, digits, runs of spaces, tabs, newlines and punctuation
PROBE_TEXTS = (
    "La città di Roma è la capitale d'Italia; perché piove così tanto a novembre?",
    "Nel 2024 abbiamo letto 365 pagine, più di mille parole: è già qualcosa! L'anno è l'1,5% più caldo.",
    "Un'altra volta: «Però», disse lei — ÀÈÌÒÙ àèìòù ç ß ü, e poi 12345678 e 3.14159.",
    "The quick brown fox jumps over the lazy dog, doesn't it? They'll say we've been there 42 times.",
    "spazi   doppi\te tabulazioni\n\nnuove righe\r\n  rientro    e fine  \n",
    "def f(x):\n    return {'a': [1, 2, 3]} # commento ... !!! ??? --- === ``` \"\"\"",
)


def tokenization_differences(llm, tokenizer, texts: Sequence[str], limit: int = 3) -> tuple[int, list[str]]:
    """(how many of ``texts`` llama.cpp tokenizes to other ids than ``tokenizer``, up to ``limit`` of them shown
    with the tokens around the first difference)."""
    expected = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    differing, shown = 0, []
    for text, want in zip(texts, expected):
        have = token_ids(llm, text)
        if have == want:
            continue
        differing += 1
        if len(shown) < limit:
            at = next((i for i, (a, b) in enumerate(zip(have, want)) if a != b), min(len(have), len(want)))
            window = slice(max(at - 2, 0), at + 3)
            shown.append(f"{text[:60]!r}: llama.cpp {tokenizer.convert_ids_to_tokens(have[window])}, tokenizer "
                         f"{tokenizer.convert_ids_to_tokens(want[window])}")
    return differing, shown


def token_ids(llm, text: str) -> list[int]:
    """llama.cpp's ids for ``text``: no BOS, special tokens read as text (as the HF tokenizer's ``encode`` with
    ``add_special_tokens=False``)."""
    return llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)


def greedy_tokens(llm, prompt_ids: Sequence[int], steps: int) -> list[int]:
    """``steps`` arg-max tokens after ``prompt_ids`` (end of sequence included, nothing stops early)."""
    llm.reset()
    llm.eval(list(prompt_ids))
    generated = []
    for _ in range(steps):
        token = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        generated.append(token)
        llm.eval([token])
    return generated


def _log_softmax(rows: np.ndarray) -> np.ndarray:
    rows = rows.astype(np.float64)
    top = rows.max(axis=-1, keepdims=True)
    return rows - top - np.log(np.exp(rows - top).sum(axis=-1, keepdims=True))


def bits_per_byte(llm, texts: Sequence[str], bos_id: int | None) -> float:
    """Bits per UTF-8 byte of ``texts`` under llama.cpp: each text scored after ``bos_id`` (when given), every
    token of the text predicted, summed over texts and divided by their bytes."""
    bits, size = 0.0, 0
    for text in texts:
        ids = token_ids(llm, text)
        context = ([bos_id] if bos_id is not None else []) + ids
        llm.reset()
        llm.eval(context)
        log_probs = _log_softmax(np.asarray(llm.scores[: len(context) - 1]))
        targets = np.asarray(context[1:])
        bits -= float(log_probs[np.arange(len(targets)), targets].sum()) / math.log(2)
        # without a BOS the first token is context, not predicted: its bytes are not counted
        size += len(text.encode("utf-8")) - (0 if bos_id is not None else len(llm.detokenize(ids[:1])))
    return bits / size


def decode_seconds(llm, token_ids: Sequence[int]) -> float:
    """Wall time of feeding ``token_ids`` to llama.cpp one at a time (batch 1, its KV cache), teacher-forced, as
    ``components/evaluation/decode_timing.py`` times transformers: the equal-content decoding measure."""
    llm.reset()
    started = time.perf_counter()
    for token in token_ids:
        llm.eval([int(token)])
    return time.perf_counter() - started


def prefill_seconds(llm, token_ids: Sequence[int]) -> float:
    """Wall time of llama.cpp reading ``token_ids`` as one prompt (batched, its context reset first): the
    equal-content prefill measure."""
    llm.reset()
    started = time.perf_counter()
    llm.eval([int(token) for token in token_ids])
    return time.perf_counter() - started


def teacher_forced_choices(llm, prompt_ids: Sequence[int], tokens: Sequence[int]) -> list[int]:
    """llama.cpp's arg-max at each step of the path ``prompt_ids + tokens`` (one per token of ``tokens``): where
    another decoder's greedy path is ``tokens``, every step can be compared, not only those before a first
    difference."""
    context = list(prompt_ids) + list(tokens)
    llm.reset()
    llm.eval(context)
    rows = np.asarray(llm.scores[len(prompt_ids) - 1: len(context) - 1])
    return [int(index) for index in rows.argmax(axis=-1)]
