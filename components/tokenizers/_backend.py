"""Reading a tokenizer's machinery: its ``tokenizers`` backend, its model kind and how it marks word starts.

Every other module of the toolkit works on the backend's JSON, never on ``decode([id])``: decoding one
token loses the word-start space of sentencepiece pieces and turns partial UTF-8 bytes into U+FFFD.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from tokenizers import Tokenizer

from vocadapt.components.collector import parse_json

METASPACE = "\u2581"  # "▁", sentencepiece's word-start marker
BYTE_PIECE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-level alphabet: every byte 0..255 to one printable character (space -> 'Ġ', 0xC3 -> 'Ã')."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    characters = printable[:]
    shift = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            characters.append(256 + shift)
            shift += 1
    return {byte: chr(code) for byte, code in zip(printable, characters)}


@lru_cache(maxsize=1)
def unicode_to_bytes() -> dict[str, int]:
    """The inverse of :func:`bytes_to_unicode`."""
    return {character: byte for byte, character in bytes_to_unicode().items()}


def backend_of(tokenizer: Any) -> Tokenizer:
    """The ``tokenizers.Tokenizer`` behind a transformers fast tokenizer (or the argument itself)."""
    if isinstance(tokenizer, Tokenizer):
        return tokenizer
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if isinstance(backend, Tokenizer):
        return backend
    raise TypeError(
        f"{type(tokenizer).__name__} has no `tokenizers` backend; load it with "
        "AutoTokenizer.from_pretrained(..., use_fast=True) or convert it to a fast tokenizer first"
    )


def backend_json(tokenizer: Any) -> dict[str, Any]:
    """The backend serialised as a dict (a fresh copy every call)."""
    return parse_json(backend_of(tokenizer).to_str())


def _walk(node: Any) -> list[dict[str, Any]]:
    """Every component dict inside a (possibly nested ``Sequence``) normalizer / pre-tokenizer / decoder."""
    if not isinstance(node, dict):
        return []
    found = [node]
    for key in ("normalizers", "pretokenizers", "decoders", "processors"):
        for child in node.get(key) or []:
            found.extend(_walk(child))
    return found


def _types(node: Any) -> set[str]:
    return {part.get("type", "") for part in _walk(node)}


@dataclass(frozen=True)
class Scheme:
    """How a tokenizer spells its tokens.

    ``spelling`` is "bytelevel" (GPT-2 byte alphabet, 'Ġ' = space), "metaspace" (sentencepiece, '▁' = space,
    optional <0xNN> byte pieces), "wordpiece" ('##' marks a continuation) or "plain" (tokens are their own text).
    """

    model: str
    spelling: str
    byte_fallback: bool
    continuing_prefix: str


def _component_json(component: Any) -> Any:
    """A normalizer / pre-tokenizer / decoder as a dict (None when absent), without serialising the vocabulary."""
    return None if component is None else json.loads(component.__getstate__())


def scheme_of(tokenizer: Any) -> Scheme:
    """Detect the model type and spelling of a tokenizer from its components (cheap: the vocabulary is not read)."""
    backend = backend_of(tokenizer)
    model = backend.model
    kind = type(model).__name__
    normalizer = _component_json(backend.normalizer)
    decoder = _component_json(backend.decoder)
    pieces = _types(_component_json(backend.pre_tokenizer)) | _types(decoder)
    replaces_space = any(
        part.get("type") == "Replace" and METASPACE in json.dumps(part, ensure_ascii=False)
        for part in _walk(normalizer) + _walk(decoder)
    )
    if kind == "WordPiece":
        spelling = "wordpiece"
    elif "ByteLevel" in pieces:
        spelling = "bytelevel"
    elif "Metaspace" in pieces or replaces_space or kind == "Unigram":
        spelling = "metaspace"
    else:
        spelling = "plain"
    prefix = getattr(model, "continuing_subword_prefix", None) or ("##" if kind == "WordPiece" else "")
    # The Python binding of Unigram does not expose byte_fallback: having all 256 byte pieces is the same thing.
    byte_fallback = getattr(model, "byte_fallback", None)
    if byte_fallback is None:
        byte_fallback = all(backend.token_to_id(f"<0x{byte:02X}>") is not None for byte in range(256))
    return Scheme(model=kind, spelling=spelling, byte_fallback=bool(byte_fallback), continuing_prefix=prefix)


@contextlib.contextmanager
def unpadded(tokenizer: Any) -> Iterator[Tokenizer]:
    """The backend with padding and truncation switched off (restored afterwards): every token of a text counts."""
    backend = backend_of(tokenizer)
    padding, truncation = backend.padding, backend.truncation
    try:
        backend.no_padding()
        backend.no_truncation()
        yield backend
    finally:
        if padding is not None:
            backend.enable_padding(**padding)
        if truncation is not None:
            backend.enable_truncation(**truncation)


@contextlib.contextmanager
def piece_encoding(tokenizer: Any) -> Iterator[Tokenizer]:
    """The backend, set up to encode a token's text without adding anything of its own, then restored.

    Sentencepiece-style tokenizers prepend '▁' to the input (a ``Prepend`` normalizer or Metaspace's
    ``prepend_scheme``) and byte-level ones may add a prefix space; for a continuation piece such as "llo" that
    would invent a word start that is not in the text. Padding and truncation are switched off too. Only the
    small components are swapped (serialising a 262K vocabulary to copy the backend takes seconds).
    Call ``encode_batch_fast(texts, add_special_tokens=False)`` on the yielded tokenizer.
    """
    with unpadded(tokenizer) as backend:
        normalizer = _component_json(backend.normalizer)
        pre_tokenizer = _component_json(backend.pre_tokenizer)
        plain_normalizer, plain_pre_tokenizer = _without_prepend(normalizer), _without_prefix_space(pre_tokenizer)
        saved = (backend.normalizer, backend.pre_tokenizer)
        try:
            if plain_normalizer != normalizer or plain_pre_tokenizer != pre_tokenizer:
                components = _components_from_json(plain_normalizer, plain_pre_tokenizer)
                backend.normalizer, backend.pre_tokenizer = components.normalizer, components.pre_tokenizer
            yield backend
        finally:
            backend.normalizer, backend.pre_tokenizer = saved


def _components_from_json(normalizer: Any, pre_tokenizer: Any) -> Tokenizer:
    """A throwaway tokenizer holding the given components (the Python API has no from_json for them)."""
    empty = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer, "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "vocab": {"<unk>": 0}, "unk_token": "<unk>"},
    }  # fmt: skip
    return Tokenizer.from_str(json.dumps(empty))


def _without_prepend(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    if node.get("type") == "Prepend":
        return None
    if node.get("type") == "Sequence":
        kept = [child for child in (_without_prepend(c) for c in node.get("normalizers", [])) if child]
        return {**node, "normalizers": kept} if kept else None
    return node


def _without_prefix_space(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    node = copy.deepcopy(node)
    for part in _walk(node):
        if part.get("type") == "Metaspace":
            part["prepend_scheme"] = "never"
            part.pop("add_prefix_space", None)
        if part.get("type") == "ByteLevel":
            part["add_prefix_space"] = False
    return node
