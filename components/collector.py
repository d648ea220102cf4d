"""Python's cyclic garbage collector paused around work that builds hundreds of thousands of containers and no
reference cycles: parsing a tokenizer.json (Gemma-3's is 33 MB: 262,145 vocabulary entries and as many merges), and
transformers building a tokenizer from one.

Every 700 new containers start a collection of the youngest generation, and every few of those one of the older
generations, which walks every object the process holds (about 310,000 in a process that has imported torch,
transformers, MLflow and the adapt pipeline). None of what a parse builds is garbage, so that time is lost: beside
those imports, ``json.loads`` of Gemma-3's tokenizer.json took 1.73 s and ``parse_json`` 0.54 s (Llama-3.1's: 0.60 s
and 0.16 s), and loading Gemma-3's tokenizer 2.60 s and 1.49 s (``benchmarks/tokenizer_loads.py`` at 7e0904f,
docs/benchmarks/test-suite.md). The collector is back on, as it was, when the block returns or raises; what it
allocated is freed by reference counting as always, and a cycle made inside the block is collected by the next
collection after it.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off inside the block, restored to its earlier state after it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def parse_json(text: str | bytes) -> Any:
    """``json.loads(text)`` with the collector paused (``json.JSONDecodeError`` as from ``json.loads``)."""
    with collector_paused():
        return json.loads(text)


__all__ = ["collector_paused", "parse_json"]
