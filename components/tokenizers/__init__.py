"""The tokenizer toolkit: canonical token forms, overlap, FVT decomposition, training, fertility, replacement and
expansion for byte-level BPE, sentencepiece (BPE / unigram, with byte fallback) and WordPiece tokenizers.

Heavy libraries (transformers, sentencepiece, torch) are imported inside the functions that need them.
"""

from vocadapt.components.tokenizers.canonical import CanonicalToken, canonical_index, canonical_tokens
from vocadapt.components.tokenizers.decompose import source_pieces
from vocadapt.components.tokenizers.expand import (
    VocabularyExpansion,
    delta_vocabulary,
    expand_vocabulary,
    expand_with_target,
    expand_with_top_k,
    lexicon_texts,
    protected_source_text,
    top_k_new_tokens,
    unreachable_tokens,
)
from vocadapt.components.tokenizers.fertility import FertilityReport, fertility_report
from vocadapt.components.tokenizers.overlap import TokenOverlap, token_overlap
from vocadapt.components.tokenizers.replace import VocabularyReplacement, replace_vocabulary, updated_model_config
from vocadapt.components.tokenizers.train import (
    KINDS, TokenizerTrainingSpec, train_tokenizer, train_tokenizer_from_dataset)

__all__ = [
    "KINDS",
    "CanonicalToken",
    "FertilityReport",
    "TokenOverlap",
    "TokenizerTrainingSpec",
    "VocabularyExpansion",
    "VocabularyReplacement",
    "canonical_index",
    "canonical_tokens",
    "delta_vocabulary",
    "expand_vocabulary",
    "expand_with_target",
    "expand_with_top_k",
    "fertility_report",
    "lexicon_texts",
    "protected_source_text",
    "replace_vocabulary",
    "source_pieces",
    "token_overlap",
    "top_k_new_tokens",
    "train_tokenizer",
    "train_tokenizer_from_dataset",
    "unreachable_tokens",
    "updated_model_config",
]
