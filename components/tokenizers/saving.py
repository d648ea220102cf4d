"""Save a tokenizer as transformers does, with what it leaves out of ``tokenizer_config.json``: the added tokens, so
the folder loads faster, and the ``legacy`` setting, so it tokenizes as the tokenizer it was saved from.

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
    """``tokenizer.save_pretrained(folder)``, then what transformers leaves out of the folder's
    ``tokenizer_config.json`` written into it: the tokenizer's added tokens (id → content and flags) as
    ``added_tokens_decoder``, and its ``legacy`` setting (:func:`record_legacy`).

    Only for a folder saved whole: a caller that rewrites ``tokenizer.json`` afterwards (new ids) records the new
    file's added tokens with :func:`record_added_tokens` instead."""
    tokenizer.save_pretrained(str(folder))
    record_legacy(folder, tokenizer)
    if getattr(tokenizer, "backend_tokenizer", None) is None:
        return  # a slow (Python or SentencePiece) tokenizer: no tokenizer.json to parse twice
    record_added_tokens(folder, [{"id": token_id, **token.__getstate__()}
                                 for token_id, token in tokenizer.added_tokens_decoder.items()], replace=False)


def record_added_tokens(folder: str | Path, added_tokens: list[dict[str, Any]], *, replace: bool = True) -> None:
    """Write ``added_tokens`` (tokenizer.json's ``added_tokens`` entries: id, content and flags) into the folder's
    ``tokenizer_config.json`` as ``added_tokens_decoder``; ``replace=False`` keeps an entry already there."""
    decoder = {str(entry["id"]): {key: value for key, value in entry.items() if key != "id"}
               for entry in sorted(added_tokens, key=lambda entry: entry["id"])}
    _update_config(folder, "added_tokens_decoder", decoder, replace=replace)


def record_legacy(folder: str | Path, tokenizer: Any) -> None:
    """Write the tokenizer's ``legacy`` setting (a SentencePiece-style Llama or Mistral tokenizer's) into the folder's
    ``tokenizer_config.json`` where transformers left it out.

    transformers 5.23 does not save it, and a ``LlamaTokenizer`` loaded without it takes ``legacy=False``, which
    rebuilds its Metaspace pre-tokenizer to prepend "▁" to the start of the text only ("first") instead of to each
    piece between special tokens ("always"). Mistral-7B-v0.1's own folder says ``"legacy": true``, so a copy saved
    by transformers tokenized text after a special token differently from the source: "<s>Ciao" was
    [1, 334 ("▁Ci"), 23985] in the source and [1, 28743 ("C"), 23985] in the copy."""
    legacy = getattr(tokenizer, "legacy", None)
    if isinstance(legacy, bool):
        _update_config(folder, "legacy", legacy, replace=False)


def _update_config(folder: str | Path, key: str, value: Any, *, replace: bool) -> None:
    config_path = Path(folder, CONFIG_FILE)
    if not config_path.is_file():
        return
    settings = json.loads(config_path.read_text(encoding="utf-8"))
    if key in settings and not replace:
        return
    settings[key] = value
    # as transformers writes the file
    config_path.write_text(json.dumps(settings, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
                           encoding="utf-8")
