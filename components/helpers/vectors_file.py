"""Static vectors in the ``.vec`` text format (``count dim`` header, then ``word v1 ... vd`` per line), keyed by the
target tokenizer's stored token strings (``Ġcasa``, ``▁casa``), as written by fastText trained on tokenized text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from vocadapt.components.helpers.token_vectors import TokenVectors
from vocadapt.components.helpers.fasttext_helper import token_words


def read_vectors_file(path: Path, target_tokenizer: Any) -> TokenVectors:
    """Vectors for the target tokens listed in ``path``; tokens not listed are unknown."""
    words = token_words(target_tokenizer)
    ids = {word: token_id for token_id, word in enumerate(words) if word is not None}
    with open(path, encoding="utf-8") as handle:
        header = handle.readline().split()
        if len(header) != 2 or not all(part.isdigit() for part in header):
            raise ValueError(f"{path} is not a .vec file: its first line should be '<count> <dim>', got {header}")
        dim = int(header[1])
        vectors = np.zeros((len(words), dim), dtype=np.float32)
        known = np.zeros(len(words), dtype=bool)
        for line_number, line in enumerate(handle, start=2):
            parts = line.rstrip("\n").rstrip(" ").split(" ")
            if len(parts) != dim + 1:
                raise ValueError(f"{path}:{line_number} has {len(parts) - 1} values, the header says {dim}")
            token_id = ids.get(parts[0])
            if token_id is not None:
                vectors[token_id] = np.asarray(parts[1:], dtype=np.float32)
                known[token_id] = True
    if not known.any():
        raise ValueError(f"no word of {path} is a token of the target tokenizer; the file must use its token strings")
    return TokenVectors(torch.from_numpy(vectors), torch.from_numpy(known), "vectors", f"{path} ({int(known.sum())} tokens)")
