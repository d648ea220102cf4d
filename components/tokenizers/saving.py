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

from vocadapt.components.collector import collector_paused

CONFIG_FILE = "tokenizer_config.json"


def save_tokenizer(tokenizer: Any, folder: str | Path) -> None:
    """``tokenizer.save_pretrained(folder)``, then what transformers leaves out of the folder's
    ``tokenizer_config.json`` written into it, in one rewrite of the file: the tokenizer's added tokens (id → content
    and flags) as ``added_tokens_decoder``, and its ``legacy`` setting (:func:`legacy_setting`).

    Only for a folder saved whole: a caller that rewrites ``tokenizer.json`` afterwards (new ids) records the new
    file's added tokens with :func:`record_added_tokens` instead."""
    with collector_paused():  # transformers parses the backend's JSON in Python to save it (components/collector.py)
        tokenizer.save_pretrained(str(folder))
    entries = legacy_setting(tokenizer)
    if getattr(tokenizer, "backend_tokenizer", None) is not None:  # a slow tokenizer has no tokenizer.json to parse
        entries["added_tokens_decoder"] = _decoder([{"id": token_id, **token.__getstate__()}
                                                    for token_id, token in tokenizer.added_tokens_decoder.items()])
    _add_to_config(folder, entries, replace=False)


def record_added_tokens(folder: str | Path, added_tokens: list[dict[str, Any]], tokenizer: Any) -> None:
    """For a scratch folder whose ``tokenizer.json`` was rewritten after ``tokenizer.save_pretrained(folder)``: write
    the new file's ``added_tokens`` entries (id, content and flags) into its ``tokenizer_config.json`` as
    ``added_tokens_decoder`` (replacing any, whose ids would be the old ones), and ``tokenizer``'s ``legacy``
    setting, before the folder is loaded back."""
    _add_to_config(folder, legacy_setting(tokenizer), replace=False)
    _add_to_config(folder, {"added_tokens_decoder": _decoder(added_tokens)}, replace=True)


def legacy_setting(tokenizer: Any) -> dict[str, bool]:
    """``{"legacy": ...}`` for a SentencePiece-style Llama or Mistral tokenizer, else nothing.

    transformers 5.23 does not save it, and a ``LlamaTokenizer`` loaded without it takes ``legacy=False``, which
    rebuilds its Metaspace pre-tokenizer to prepend "▁" to the start of the text only ("first") instead of to each
    piece between special tokens ("always"). Mistral-7B-v0.1's own folder says ``"legacy": true``, so a copy saved
    by transformers tokenized text after a special token differently from the source: "<s>Ciao" was
    [1, 334 ("▁Ci"), 23985] in the source and [1, 28743 ("C"), 23985] in the copy."""
    legacy = getattr(tokenizer, "legacy", None)
    return {"legacy": legacy} if isinstance(legacy, bool) else {}


def _decoder(added_tokens: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {str(entry["id"]): {key: value for key, value in entry.items() if key != "id"}
            for entry in sorted(added_tokens, key=lambda entry: entry["id"])}


def _add_to_config(folder: str | Path, entries: dict[str, Any], *, replace: bool) -> None:
    """Write ``entries`` into the folder's tokenizer_config.json (``replace=False``: a key already there stays)."""
    config_path = Path(folder, CONFIG_FILE)
    if not entries or not config_path.is_file():
        return
    settings = json.loads(config_path.read_text(encoding="utf-8"))
    settings.update(entries if replace else {key: value for key, value in entries.items() if key not in settings})
    # as transformers writes the file
    config_path.write_text(json.dumps(settings, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
                           encoding="utf-8")
