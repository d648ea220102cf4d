"""The FVT decomposition: which source tokens a target token's text is made of.

FVT (Gee et al. 2022; SAVA §3.1; "Design choices" §3.2) initialises a new token as the mean of the source rows of
``T_s(t)``. ``T_s(t)`` must tokenize the token's *text*: tokenizing the stored string ``▁hello`` with a
sentencepiece tokenizer gives ``['▁', '▁hello']``, and a byte-level string like ``ĠcaffÃ¨`` gives garbage. So the
canonical bytes are turned back into text (a leading space where the token starts a word) and encoded with a copy
of the source backend that adds no prefix space and no special tokens. Bytes that are not valid UTF-8 (a byte-level
token holding half a character) map onto the source's own byte tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vocadapt.components.tokenizers._backend import piece_encoding
from vocadapt.components.tokenizers.canonical import (
    CanonicalToken,
    byte_token_ids,
    canonical_index,
    canonical_tokens,
    special_role_ids,
)

# A segment is either text to encode or one byte that is not valid UTF-8 on its own.
Segment = tuple[str, str | int]


def _segments(form: CanonicalToken) -> list[Segment]:
    """Split a token's bytes into runs of valid UTF-8 text and single stray bytes."""
    try:
        return [("text", form.text_bytes.decode("utf-8"))]
    except UnicodeDecodeError:
        decoded = form.text_bytes.decode("utf-8", errors="surrogateescape")
    segments: list[Segment] = []
    run = []
    for character in decoded:
        if "\udc80" <= character <= "\udcff":  # surrogateescape's stand-in for an undecodable byte
            if run:
                segments.append(("text", "".join(run)))
                run = []
            segments.append(("byte", ord(character) - 0xDC00))
        else:
            run.append(character)
    if run:
        segments.append(("text", "".join(run)))
    return segments


def source_pieces(
    target_tokenizer: Any,
    target_ids: Sequence[int],
    source_tokenizer: Any,
    *,
    batch_size: int = 8192,
) -> list[list[int]]:
    """For each target token, the source token ids its text tokenizes into.

    Args:
        target_tokenizer: the tokenizer whose tokens are decomposed.
        target_ids: target token ids, shape ``(n,)``.
        source_tokenizer: the tokenizer of the source model.
        batch_size: texts per ``encode_batch`` call.

    Returns:
        ``n`` lists of source ids, never empty. A special target token with a source counterpart (same role or
        same content) maps onto that one token.

    Raises:
        ValueError: an id is not a token of the target, or a token's bytes cannot be expressed in the source
            (no byte tokens and no unk token).
    """
    target_forms = canonical_tokens(target_tokenizer)
    source_index = canonical_index(source_tokenizer)
    source_by_role = special_role_ids(source_tokenizer)
    role_of_target = {token_id: role for role, token_id in special_role_ids(target_tokenizer).items()}
    byte_ids = byte_token_ids(source_tokenizer)
    unk_id = source_by_role.get("unk")

    plans: list[list[int] | list[Segment]] = []
    texts: list[str] = []
    for target_id in target_ids:
        form = target_forms[target_id] if 0 <= target_id < len(target_forms) else None
        if form is None:
            raise ValueError(
                f"target id {target_id} is not a token of the target tokenizer "
                f"(it has ids 0..{len(target_forms) - 1}); pass ids of existing tokens"
            )
        direct = _special_counterpart(target_id, form, role_of_target, source_by_role, source_index)
        if direct is not None:
            plans.append([direct])
            continue
        segments = _segments(form)
        texts.extend(text for kind, text in segments if kind == "text")
        plans.append(segments)

    encoded: list[list[int]] = []
    with piece_encoding(source_tokenizer) as encoder:
        for start in range(0, len(texts), batch_size):
            batch = encoder.encode_batch_fast(texts[start : start + batch_size], add_special_tokens=False)
            encoded.extend(encoding.ids for encoding in batch)
    cursor = iter(encoded)
    return [
        _assemble(target_id, plan, cursor, byte_ids, unk_id, target_forms[target_id])
        for target_id, plan in zip(target_ids, plans)
    ]


def _assemble(target_id: int, plan, cursor, byte_ids: dict[int, int], unk_id: int | None, form) -> list[int]:
    """One token's source ids: a direct special match, or its segments' encodings and byte tokens in order."""
    if plan and isinstance(plan[0], int):
        return list(plan)
    pieces: list[int] = []
    for kind, value in plan:
        if kind == "text":
            pieces.extend(next(cursor))
        else:
            pieces.append(_byte_piece(int(value), byte_ids, unk_id, target_id))
    if pieces:
        return pieces
    if unk_id is None:
        raise ValueError(
            f"target token {target_id} ({form!r}) tokenizes to nothing in the source and the source has no unk "
            "token; drop the token or give the source an unk token"
        )
    return [unk_id]


def _special_counterpart(
    target_id: int,
    form: CanonicalToken,
    role_of_target: dict[int, str],
    source_by_role: dict[str, int],
    source_index: dict[CanonicalToken, int],
) -> int | None:
    if not form.special:
        return None
    role = role_of_target.get(target_id)
    if role is not None and role in source_by_role:
        return source_by_role[role]
    return source_index.get(form)


def _byte_piece(byte: int, byte_ids: dict[int, int], unk_id: int | None, target_id: int) -> int:
    if byte in byte_ids:
        return byte_ids[byte]
    if unk_id is not None:
        return unk_id
    raise ValueError(
        f"target token {target_id} holds the byte 0x{byte:02X}, which is not valid UTF-8 on its own, and the "
        "source tokenizer has neither byte tokens nor an unk token; use a source with byte fallback"
    )
