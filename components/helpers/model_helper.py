"""Input embeddings of a Hugging Face model that already uses the target tokenizer (SAVA's helper, e.g. Minerva-3B
for Italian). Only the embedding tensor is read from the safetensors shards; the model is never built."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from vocadapt.components.helpers import TokenVectors

_EMBEDDING_SUFFIXES = ("embed_tokens.weight", "wte.weight", "word_embeddings.weight", "shared.weight", "tok_embeddings.weight")


def _embedding_tensor(model_dir: Path) -> torch.Tensor:
    from safetensors import safe_open

    index_file = model_dir / "model.safetensors.index.json"
    if index_file.exists():
        weight_map = json.loads(index_file.read_text())["weight_map"]
    elif (model_dir / "model.safetensors").exists():
        with safe_open(str(model_dir / "model.safetensors"), framework="pt") as handle:
            weight_map = {name: "model.safetensors" for name in handle.keys()}
    else:
        raise ValueError(f"helper model {model_dir} has no safetensors weights (model.safetensors or an index)")
    for suffix in _EMBEDDING_SUFFIXES:
        names = sorted(name for name in weight_map if name.endswith(suffix))
        if names:
            with safe_open(str(model_dir / weight_map[names[0]]), framework="pt") as handle:
                return handle.get_tensor(names[0]).float()
    raise ValueError(f"helper model {model_dir}: no input-embedding tensor (looked for *{', *'.join(_EMBEDDING_SUFFIXES)})")


def model_embeddings_helper(model_dir: Path, target_tokenizer: Any) -> TokenVectors:
    """The helper model's input embeddings as target-token vectors; its tokenizer must be the target tokenizer."""
    from transformers import AutoTokenizer

    if (model_dir / "tokenizer.json").exists() or (model_dir / "tokenizer_config.json").exists():
        helper_tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        if helper_tokenizer.get_vocab() != target_tokenizer.get_vocab():
            raise ValueError(
                f"helper model {model_dir} uses a different tokenizer from the target tokenizer; a helper model must "
                "have been trained with the target tokenizer (or use helper 'fasttext')"
            )
    embeddings = _embedding_tensor(model_dir)
    size = len(target_tokenizer)
    vectors = torch.zeros(size, embeddings.shape[1])
    rows = min(size, embeddings.shape[0])
    vectors[:rows] = embeddings[:rows]
    known = torch.arange(size) < rows
    return TokenVectors(vectors, known, "model", f"input embeddings of {model_dir} ({tuple(embeddings.shape)})")
