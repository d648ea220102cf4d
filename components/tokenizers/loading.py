"""Loading a tokenizer folder (or hub name) with Python's cyclic garbage collector paused for the load
(``components/collector.py``).

transformers 5 builds a ``GemmaTokenizer``, ``Qwen2Tokenizer`` or ``LlamaTokenizer`` from ``tokenizer.json`` parsed in
Python: hundreds of thousands of vocabulary entries and merge pairs, each a new container, none of them garbage.
Beside the adapt pipeline's imports, Gemma-3's tokenizer loaded in 1.49 s paused against 2.60 s, Qwen3's in 0.41 s
against 0.65 s (``benchmarks/tokenizer_loads.py`` at 7e0904f); Llama-3.1's, built by Rust from the file, takes the
same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vocadapt.components.collector import collector_paused


def load_pretrained_tokenizer(name: str | Path, **kwargs: Any):
    """``AutoTokenizer.from_pretrained(name, **kwargs)`` with the collector paused (see the module's docstring)."""
    from transformers import AutoTokenizer

    with collector_paused():
        return AutoTokenizer.from_pretrained(str(name), **kwargs)


__all__ = ["load_pretrained_tokenizer"]
