"""The tokenizer toolkit: canonical token forms, overlap, FVT decomposition, training, fertility, replacement and
expansion for byte-level BPE, sentencepiece (BPE / unigram, with byte fallback) and WordPiece tokenizers."""

from vocadapt.components.tokenizers.canonical import CanonicalToken, canonical_index, canonical_tokens
from vocadapt.components.tokenizers.decompose import source_pieces
from vocadapt.components.tokenizers.overlap import TokenOverlap, token_overlap

__all__ = [
    "CanonicalToken",
    "TokenOverlap",
    "canonical_index",
    "canonical_tokens",
    "source_pieces",
    "token_overlap",
]
