"""Input embeddings of a Hugging Face model that already uses the target tokenizer (SAVA's helper, e.g. Minerva-3B
for Italian). Only the embedding tensor is read from the safetensors shards; the model is never built."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from vocadapt.components.helpers.token_vectors import TokenVectors

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


# token -> id of each helper tokenizer.json read in this process, keyed by a digest of the file's bytes: one adapt
# reads its helper once for the embeddings and once for the head, and a sweep or the family tests read the same
# helper for every helper method (a 262K-token Gemma-3 vocabulary took 0.3 to 2 s a read, hashing it tens of ms)
_VOCABULARIES: dict[str, dict[str, int]] = {}


def _helper_vocabulary(model_dir: Path) -> dict[str, int] | None:
    """The helper's token -> id, added tokens included (read only: the dict is shared by later calls for the same
    file); None when the folder holds no tokenizer. A tokenizer.json is read by the tokenizers library alone (0.3 s
    for Gemma-3's 262K tokens, where building the transformers tokenizer took 5 s)."""
    tokenizer_json = model_dir / "tokenizer.json"
    if tokenizer_json.exists():
        from tokenizers import Tokenizer

        from vocadapt.components.model_folder_checks import file_digest

        digest = file_digest(tokenizer_json)
        if digest not in _VOCABULARIES:
            if len(_VOCABULARIES) >= 8:
                _VOCABULARIES.clear()
            _VOCABULARIES[digest] = Tokenizer.from_file(str(tokenizer_json)).get_vocab(with_added_tokens=True)
        return _VOCABULARIES[digest]
    if (model_dir / "tokenizer_config.json").exists():
        from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

        return load_pretrained_tokenizer(str(model_dir)).get_vocab()
    return None


def model_embeddings_helper(model_dir: Path, target_tokenizer: Any) -> TokenVectors:
    """The helper model's input embeddings as target-token vectors.

    Its tokenizer must be the target tokenizer: every token of the helper's vocabulary has the same id in the target
    vocabulary. The target may hold more (the source model's special tokens, which ``replace_vocabulary`` appends
    when the target tokenizer is the helper's own, as in SAVA with Minerva's); those have no vector.
    """
    embeddings = _embedding_tensor(model_dir)
    size = len(target_tokenizer)
    rows = min(size, embeddings.shape[0])
    known = torch.arange(size) < rows
    helper_vocab = _helper_vocabulary(model_dir)
    if helper_vocab is not None:
        target_vocab = target_tokenizer.get_vocab()
        differing = [token for token, token_id in helper_vocab.items() if target_vocab.get(token) != token_id]
        if differing:
            raise ValueError(
                f"helper model {model_dir} uses a different tokenizer from the target tokenizer ({len(differing):,} of "
                f"its {len(helper_vocab):,} tokens are missing or have other ids, e.g. {differing[:3]}); a helper "
                "model must have been trained with the target tokenizer (or use helper 'fasttext')"
            )
        helper_ids = torch.zeros(size, dtype=torch.bool)
        helper_ids[[token_id for token_id in helper_vocab.values() if token_id < size]] = True
        known &= helper_ids
    vectors = torch.zeros(size, embeddings.shape[1])
    vectors[:rows] = embeddings[:rows]
    vectors[~known] = 0.0
    return TokenVectors(vectors, known, "model", f"input embeddings of {model_dir} ({tuple(embeddings.shape)})")
