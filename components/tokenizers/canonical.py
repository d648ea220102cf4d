"""One spelling for every token: its bytes plus whether it starts a word, never the stored string or ``decode([id])``.

Byte-level BPE stores ``ĠCafÃ©``, sentencepiece stores ``▁Café`` (and ``<0xC3>`` byte pieces), WordPiece stores
``##é`` for a continuation. All of them are the same kind of thing: a byte string that may begin a word. The
canonical form is ``CanonicalToken(data=b"Caf\\xc3\\xa9", word_start=True, special=False)``, so that tokens that
differ only in spelling compare equal across tokenizers. A leading space is the word-start flag, never part of
``data``: ``Ġ`` alone and ``▁`` alone are both ``(b"", word_start=True)``.

Nothing here decodes a single token: the forms come from the backend's vocabulary and its added tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any, NamedTuple

from vocadapt.components.collector import collector_paused
from vocadapt.components.tokenizers._backend import (
    BYTE_PIECE,
    METASPACE,
    Scheme,
    backend_of,
    bytes_to_unicode,
    scheme_of,
    unicode_to_bytes,
)

SPECIAL_ROLES = ("bos", "eos", "pad", "unk")


class CanonicalToken(NamedTuple):
    """A token as bytes plus a word-start flag; special tokens (``<s>``, ``<|im_end|>``) are their content's bytes.
    A named tuple (immutable, hashable): a 262K vocabulary builds one per id, three times faster than a frozen
    dataclass."""

    data: bytes
    word_start: bool
    special: bool = False

    @property
    def text_bytes(self) -> bytes:
        """The bytes this token stands for in running text (a word start is a leading space)."""
        return (b" " if self.word_start else b"") + self.data


def _from_bytes(raw: bytes, special: bool = False) -> CanonicalToken:
    if raw.startswith(b" "):
        return CanonicalToken(raw[1:], True, special)
    return CanonicalToken(raw, False, special)


@lru_cache(maxsize=1)
def _bytelevel_translation() -> dict[int, str]:
    """``str.translate`` table: each character of the byte alphabet to the Latin-1 character of its byte, and every
    other character below 256 to U+FFFF (not Latin-1), so a piece outside the alphabet fails to encode as Latin-1."""
    table = {code: "\uffff" for code in range(256)}
    table.update({ord(character): chr(byte) for character, byte in unicode_to_bytes().items()})
    return table


def _bytelevel_bytes(piece: str) -> bytes:
    # one C-level pass per piece instead of a dict lookup per character (with the named tuple, Llama-3.1's 128,256
    # forms in 0.6 s instead of 0.9 s)
    try:
        return piece.translate(_bytelevel_translation()).encode("latin-1")
    except UnicodeEncodeError:
        return piece.encode("utf-8")  # a piece outside the byte alphabet is stored as its own text


def canonical_piece(piece: str, scheme: Scheme) -> CanonicalToken:
    """The canonical form of one entry of the model vocabulary (not an added token)."""
    if scheme.spelling == "bytelevel":
        return _from_bytes(_bytelevel_bytes(piece))
    if scheme.spelling == "metaspace":
        match = BYTE_PIECE.match(piece) if scheme.byte_fallback and piece.startswith("<0x") else None
        if match:
            return _from_bytes(bytes([int(match.group(1), 16)]))
        return _from_bytes(piece.replace(METASPACE, " ").encode("utf-8"))
    if scheme.spelling == "wordpiece":
        prefix = scheme.continuing_prefix
        if prefix and piece.startswith(prefix) and len(piece) > len(prefix):
            return CanonicalToken(piece[len(prefix) :].encode("utf-8"), False)
        return CanonicalToken(piece.encode("utf-8"), True)
    return _from_bytes(piece.encode("utf-8"))


def canonical_tokens(tokenizer: Any) -> list[CanonicalToken | None]:
    """The canonical form of every token id, indexed by id; ``None`` for ids that are not tokens.

    Args:
        tokenizer: a transformers fast tokenizer or a ``tokenizers.Tokenizer``.

    Returns:
        a list of length ``max id + 1``. Added tokens use their content (``special`` as the tokenizer marks them).
    """
    return list(_analyse(tokenizer)[0])


def byte_piece_ids(tokenizer: Any) -> frozenset[int]:
    """Ids of sentencepiece byte-fallback pieces (``<0xNN>``); empty for other tokenizers."""
    return _analyse(tokenizer)[1]


# id(backend) -> (backend, fingerprint, forms, byte piece ids). The backend is held so that its id is not reused;
# a 262K vocabulary takes seconds to read, and the initialisers ask about the same tokenizers many times.
_ANALYSES: dict[int, tuple[Any, tuple, tuple[CanonicalToken | None, ...], frozenset[int]]] = {}


def _analyse(tokenizer: Any) -> tuple[tuple[CanonicalToken | None, ...], frozenset[int]]:
    backend = backend_of(tokenizer)
    scheme = scheme_of(tokenizer)
    size = backend.get_vocab_size(with_added_tokens=True)
    fingerprint = (scheme, size, backend.id_to_token(size - 1), backend.id_to_token(0))
    cached = _ANALYSES.get(id(backend))
    if cached is not None and cached[0] is backend and cached[1] == fingerprint:
        return cached[2], cached[3]
    vocab = backend.get_vocab(with_added_tokens=False)
    added = backend.get_added_tokens_decoder()
    forms: list[CanonicalToken | None] = [None] * (max([*vocab.values(), *added.keys(), -1]) + 1)
    with collector_paused():  # a form per token: 262K new objects for Gemma-3's (components/collector.py)
        for piece, token_id in vocab.items():
            forms[token_id] = canonical_piece(piece, scheme)
    byte_pieces = set()
    if scheme.byte_fallback and scheme.spelling == "metaspace":
        byte_pieces = {token_id for piece, token_id in vocab.items()
                       if piece.startswith("<0x") and BYTE_PIECE.match(piece)}
    for token_id, added_token in added.items():
        content = added_token.content.encode("utf-8")
        forms[token_id] = CanonicalToken(content, False, True) if added_token.special else _from_bytes(content)
        byte_pieces.discard(token_id)
    if len(_ANALYSES) >= 8:
        _ANALYSES.pop(next(iter(_ANALYSES)))
    entry = (backend, fingerprint, tuple(forms), frozenset(byte_pieces))
    _ANALYSES[id(backend)] = entry
    return entry[2], entry[3]


def byte_token_ids(tokenizer: Any) -> dict[int, int]:
    """For each byte value 0..255, the id of the token that is exactly that byte, where one exists.

    Byte-level BPE has the whole alphabet as base tokens; sentencepiece with byte fallback has ``<0xNN>``
    pieces; WordPiece and sentencepiece without byte fallback have none (an empty or partial dict).
    """
    scheme = scheme_of(tokenizer)
    vocab = backend_of(tokenizer).get_vocab(with_added_tokens=False)
    found: dict[int, int] = {}
    for byte in range(256):
        if scheme.spelling == "bytelevel":
            piece = bytes_to_unicode()[byte]
        elif scheme.spelling == "metaspace" and scheme.byte_fallback:
            piece = f"<0x{byte:02X}>"
        else:
            continue
        if piece in vocab:
            found[byte] = vocab[piece]
    return found


def canonical_index(tokenizer: Any, forms: Sequence[CanonicalToken | None] | None = None) -> dict[CanonicalToken, int]:
    """Canonical form -> token id, one id per form.

    When a tokenizer spells the same bytes twice (Gemma has both ``A`` and ``<0x41>``), the regular piece wins
    over the byte-fallback piece because it is the one the tokenizer emits; otherwise the lowest id wins.
    """
    forms = _analyse(tokenizer)[0] if forms is None else forms
    byte_pieces = byte_piece_ids(tokenizer)
    index: dict[CanonicalToken, int] = {}
    for token_id, form in enumerate(forms):
        if form is not None and token_id not in byte_pieces:
            index.setdefault(form, token_id)
    for token_id in sorted(byte_pieces):
        form = forms[token_id]
        if form is not None:
            index.setdefault(form, token_id)
    return index


def special_role_ids(tokenizer: Any) -> dict[str, int]:
    """The ids of the bos, eos, pad and unk tokens the tokenizer declares (roles it lacks are left out)."""
    roles: dict[str, int] = {}
    for role in SPECIAL_ROLES:
        token_id = getattr(tokenizer, f"{role}_token_id", None)
        if isinstance(token_id, int):
            roles[role] = token_id
    return roles
