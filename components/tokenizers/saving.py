"""Save a tokenizer as transformers does, with the added tokens in ``tokenizer_config.json`` too, so it loads faster.

transformers 5 writes no ``added_tokens_decoder`` into ``tokenizer_config.json``. Loading a folder without one takes
a legacy path: ``from_pretrained`` parses the whole ``tokenizer.json`` in Python only to read its added tokens, and
then the Rust tokenizer parses the file again. The hub's own folders (Llama-3.1-8B, Qwen3-8B, Gemma-3) carry the
entry, so they skip that parse. Measured on copies of the family tokenizers, each saved by ``save_pretrained``
and then loaded, best of two (docs/benchmarks/test-suite.md): Llama-3.1's load 1.48 s → 0.81 s, Gemma-3's
5.13 s → 3.41 s, Qwen3's 1.87 s → 1.03 s, Mistral's 0.49 s → 0.15 s. The loaded tokenizer is the same either way:
the entry holds what the legacy path reads from ``tokenizer.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CONFIG_FILE = "tokenizer_config.json"


def save_tokenizer(tokenizer: Any, folder: str | Path) -> None:
    """``tokenizer.save_pretrained(folder)``, then the tokenizer's added tokens (id → content and flags) written into
    the folder's ``tokenizer_config.json`` as ``added_tokens_decoder``, where transformers did not write them.

    Only for a folder saved whole: a caller that rewrites ``tokenizer.json`` afterwards (new ids) must not record
    the old ids beside it."""
    tokenizer.save_pretrained(str(folder))
    config_path = Path(folder, CONFIG_FILE)
    if getattr(tokenizer, "backend_tokenizer", None) is None or not config_path.is_file():
        return  # a slow (Python or SentencePiece) tokenizer: no tokenizer.json to parse twice
    settings = json.loads(config_path.read_text(encoding="utf-8"))
    if "added_tokens_decoder" in settings:
        return
    settings["added_tokens_decoder"] = {str(token_id): dict(token.__getstate__())
                                        for token_id, token in sorted(tokenizer.added_tokens_decoder.items())}
    # as transformers writes the file
    config_path.write_text(json.dumps(settings, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
                           encoding="utf-8")
