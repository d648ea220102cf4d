"""How many tokens a tokenizer spends on a text: fertility, parity and the use of a new vocabulary.

Fertility is tokens per whitespace word (Rust et al. 2021; SAVA Table 2); "Design choices" §4.4 uses tokens per
text instead, and §5.1 compares against English (parity: tokens for a text over tokens for its English
translation, Petrov et al. 2023). Per-character and per-byte figures are independent of word segmentation, and
the byte-fallback rate tells how often a tokenizer gave up on a character. Documents are batch-encoded with the
Rust backend (``encode_batch_fast``) and counted with numpy, never one document at a time in Python.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from vocadapt.components.tokenizers._backend import unpadded
from vocadapt.components.tokenizers.canonical import _analyse, special_role_ids


@dataclass(frozen=True)
class FertilityReport:
    """Token counts of one tokenizer on one set of documents (special tokens are not counted).

    ``parity`` is ``tokens / reference_tokens`` on parallel text (1.0: as cheap as the reference language);
    ``new_token_share`` is the share of tokens whose id is in ``new_token_ids``; ``byte_fallback_rate`` the share
    of tokens that stand for less than a whole character (``<0xNN>`` pieces, partial UTF-8 byte-level tokens);
    ``unknown_rate`` the share of unk tokens.
    """

    tokenizer: str
    documents: int
    words: int
    characters: int
    bytes: int
    tokens: int
    tokens_per_word: float
    tokens_per_character: float
    tokens_per_byte: float
    bytes_per_token: float
    tokens_per_document: float
    byte_fallback_rate: float
    unknown_rate: float
    reference_tokens: int | None = None
    parity: float | None = None
    new_token_share: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready (None where not measured)."""
        return asdict(self)


def count_tokens(tokenizer: Any, documents: Sequence[str], *, batch_size: int = 512) -> list[np.ndarray]:
    """The token ids of every document, shape ``(n_tokens_i,)`` each, without special tokens, batch-encoded."""
    ids: list[np.ndarray] = []
    with unpadded(tokenizer) as backend:
        for start in range(0, len(documents), batch_size):
            batch = backend.encode_batch_fast(list(documents[start : start + batch_size]), add_special_tokens=False)
            ids.extend(np.asarray(encoding.ids, dtype=np.int64) for encoding in batch)
    return ids


# id(forms) -> (forms, lookup): the forms tuple is the canonical-form cache's own, so it identifies the vocabulary.
_FRAGMENTS: dict[int, tuple[tuple, np.ndarray]] = {}


def _fragment_lookup(tokenizer: Any) -> np.ndarray:
    """Boolean per id, shape ``(n_ids + 1,)``: the token holds bytes that are not whole UTF-8 characters."""
    forms = _analyse(tokenizer)[0]
    cached = _FRAGMENTS.get(id(forms))
    if cached is not None and cached[0] is forms:
        return cached[1]
    lookup = np.zeros(len(forms) + 1, dtype=bool)
    for token_id, form in enumerate(forms):
        if form is not None and not form.special:
            try:
                form.data.decode("utf-8")
            except UnicodeDecodeError:
                lookup[token_id] = True
    if len(_FRAGMENTS) >= 8:
        _FRAGMENTS.pop(next(iter(_FRAGMENTS)))
    _FRAGMENTS[id(forms)] = (forms, lookup)
    return lookup


@dataclass(frozen=True)
class ParallelText:
    """The measured documents in a reference language (English), line-aligned with them, for parity: read with
    ``tokenizer`` (None: the measured tokenizer); ``language`` names the reference in a report."""

    documents: Sequence[str]
    tokenizer: Any = None
    language: str = "en"


def fertility_report(
    tokenizer: Any,
    documents: Sequence[str],
    *,
    reference: ParallelText | None = None,
    new_token_ids: Iterable[int] | None = None,
    batch_size: int = 512,
    name: str | None = None,
) -> FertilityReport:
    """Measure a tokenizer on documents.

    Args:
        tokenizer: a transformers fast tokenizer or a ``tokenizers.Tokenizer``.
        documents: texts, one per document.
        reference: the same documents in the reference language, for parity.
        new_token_ids: ids of the new vocabulary (ΔV) for the share of new tokens.
        batch_size: documents per ``encode_batch_fast`` call.
        name: label in the report (default: the tokenizer's ``name_or_path``).

    Raises:
        ValueError: no documents, or reference documents that are not line-aligned.
    """
    documents = list(documents)
    reference_documents = reference.documents if reference is not None else None
    if not documents:
        raise ValueError("no documents to measure fertility on; pass a non-empty corpus")
    if reference_documents is not None and len(reference_documents) != len(documents):
        raise ValueError(
            f"parity needs parallel text: {len(documents)} documents but {len(reference_documents)} references; "
            "pass line-aligned translations"
        )
    encoded = count_tokens(tokenizer, documents, batch_size=batch_size)
    all_ids = np.concatenate(encoded) if encoded else np.zeros(0, dtype=np.int64)
    tokens = int(all_ids.size)
    words = sum(len(document.split()) for document in documents)
    characters = sum(len(document) for document in documents)
    n_bytes = sum(len(document.encode("utf-8")) for document in documents)
    fragments = _fragment_lookup(tokenizer)
    unk_id = special_role_ids(tokenizer).get("unk")
    report: dict[str, Any] = {
        "tokenizer": name or str(getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__),
        "documents": len(documents), "words": words, "characters": characters, "bytes": n_bytes, "tokens": tokens,
        "tokens_per_word": tokens / max(words, 1),
        "tokens_per_character": tokens / max(characters, 1),
        "tokens_per_byte": tokens / max(n_bytes, 1),
        "bytes_per_token": n_bytes / max(tokens, 1),
        "tokens_per_document": tokens / len(documents),
        "byte_fallback_rate": float(fragments[np.clip(all_ids, 0, fragments.size - 1)].mean()) if tokens else 0.0,
        "unknown_rate": float((all_ids == unk_id).mean()) if tokens and unk_id is not None else 0.0,
    }  # fmt: skip
    if reference_documents is not None:
        counted = count_tokens(reference.tokenizer or tokenizer, list(reference_documents), batch_size=batch_size)
        report["reference_tokens"] = int(sum(ids.size for ids in counted))
        report["parity"] = tokens / max(report["reference_tokens"], 1)
    if new_token_ids is not None:
        new_ids = np.fromiter(new_token_ids, dtype=np.int64)
        report["new_token_share"] = float(np.isin(all_ids, new_ids).mean()) if tokens else 0.0
    return FertilityReport(**report)


def fertility_table(tokenizers: dict[str, Any], documents: Sequence[str], **options) -> dict[str, FertilityReport]:
    """One report per named tokenizer on the same documents (options as :func:`fertility_report`)."""
    return {name: fertility_report(tok, documents, name=name, **options) for name, tok in tokenizers.items()}

