"""Save a tokenizer as transformers does, with the added tokens in ``tokenizer_config.json`` too, so it loads faster.

transformers 5 writes no ``added_tokens_decoder`` into ``tokenizer_config.json``. Loading a folder without one takes
a legacy path: ``from_pretrained`` parses the whole ``tokenizer.json`` in Python only to read its added tokens, and
then the Rust tokenizer parses the file again. The hub's own folders (Llama-3.1-8B, Qwen3-8B, Gemma-3) carry the
entry, so they skip that parse. ``benchmarks/tokenizer_loads.py`` (each family's real tokenizer saved both ways,
the best of three loads; docs/benchmarks/test-suite.md): Llama-3.1's load 1.19 s → 0.53 s, Qwen3's 1.06 s →
0.61 s, Gemma-3's 4.03 s → 2.82 s, Mistral's 0.32 s → 0.13 s. The loaded tokenizer is the same either way: the
entry holds what the legacy path reads from ``tokenizer.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CONFIG_FILE = "tokenizer_config.json"


def save_tokenizer(tokenizer: Any, folder: str | Path) -> None:
    """``tokenizer.save_pretrained(folder)``, then the tokenizer's added tokens (id → content and flags) written into
    the folder's ``tokenizer_config.json`` as ``added_tokens_decoder``, where transformers did not write them.

    Only for a folder saved whole: a caller that rewrites ``tokenizer.json`` afterwards (new ids) records the new
    file's added tokens with :func:`record_added_tokens` instead."""
    tokenizer.save_pretrained(str(folder))
    if getattr(tokenizer, "backend_tokenizer", None) is None:
        return  # a slow (Python or SentencePiece) tokenizer: no tokenizer.json to parse twice
    record_added_tokens(folder, [{"id": token_id, **token.__getstate__()}
                                 for token_id, token in tokenizer.added_tokens_decoder.items()], replace=False)


def record_added_tokens(folder: str | Path, added_tokens: list[dict[str, Any]], *, replace: bool = True) -> None:
    """Write ``added_tokens`` (tokenizer.json's ``added_tokens`` entries: id, content and flags) into the folder's
    ``tokenizer_config.json`` as ``added_tokens_decoder``; ``replace=False`` keeps an entry already there."""
    config_path = Path(folder, CONFIG_FILE)
    if not config_path.is_file():
        return
    settings = json.loads(config_path.read_text(encoding="utf-8"))
    if "added_tokens_decoder" in settings and not replace:
        return
    settings["added_tokens_decoder"] = {str(entry["id"]): {key: value for key, value in entry.items() if key != "id"}
                                        for entry in sorted(added_tokens, key=lambda entry: entry["id"])}
    # as transformers writes the file
    config_path.write_text(json.dumps(settings, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
                           encoding="utf-8")
