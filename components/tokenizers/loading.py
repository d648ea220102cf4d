"""Loading a tokenizer folder (or hub name) with Python's cyclic garbage collector paused for the load.

transformers 5 builds a ``GemmaTokenizer``, ``Qwen2Tokenizer`` or ``LlamaTokenizer`` from ``tokenizer.json`` parsed in
Python: hundreds of thousands of vocabulary entries and merge pairs, each a new container object. Every 700 of them
start a collection of the youngest generation and every few of those an older one, which walks every object the
process holds; none of that is garbage (a load makes no reference cycles worth collecting), so it is time lost.
Paused, Gemma-3's tokenizer loads in 1.2 to 1.3 s instead of 1.9 to 2.3 s, Qwen3's in 0.4 to 0.5 s instead of
0.8 to 0.9 s (``benchmarks/tokenizer_loads.py``); Llama-3.1's, built by Rust from the file, takes the same. The
collector is back on, as it was, once the load returns or fails; what the load allocated is freed by reference
counting as usual.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off inside the block, restored to its earlier state after it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load_pretrained_tokenizer(name: str | Path, **kwargs: Any):
    """``AutoTokenizer.from_pretrained(name, **kwargs)`` with the collector paused (see the module's docstring)."""
    from transformers import AutoTokenizer

    with collector_paused():
        return AutoTokenizer.from_pretrained(str(name), **kwargs)


__all__ = ["collector_paused", "load_pretrained_tokenizer"]
