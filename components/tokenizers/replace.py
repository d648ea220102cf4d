"""Replace a model's vocabulary with a target tokenizer (SAVA §3.1): the adapted tokenizer and the id map.

The adapted tokenizer is the target tokenizer, made to speak to the source model: the source's
special tokens (bos, eos, pad, unk and every special token its chat template uses) exist in it, play the same
roles, insert bos/eos as the source did, and map onto the source's rows; the source's chat template renders.
Tokens shared on canonical form keep their source rows; the rest (``new_token_ids``) need an initialiser.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

from vocadapt.components.tokenizers._wrap import inserts_bos_eos
from vocadapt.components.tokenizers.canonical import SPECIAL_ROLES
from vocadapt.components.tokenizers.overlap import TokenOverlap, token_overlap


@dataclass
class VocabularyReplacement:
    """The result of replacing a source model's vocabulary.

    Attributes:
        tokenizer: the adapted tokenizer (a transformers fast tokenizer).
        target_to_source: adapted token id -> source token id for every shared token (incl. special roles).
        new_token_ids: adapted ids without a source counterpart, ascending (rows to initialise).
        overlap: the full overlap report (SALT Table 6 figures).
        special_token_ids: role -> adapted id, for bos/eos/pad/unk.
        source_special_token_ids: role -> source id.
        added_special_tokens: source special tokens that the target lacked and that were appended.
        source_vocab_size: ``len(source_tokenizer)``.
    """

    tokenizer: Any
    target_to_source: dict[int, int]
    new_token_ids: list[int]
    overlap: TokenOverlap
    special_token_ids: dict[str, int] = field(default_factory=dict)
    source_special_token_ids: dict[str, int] = field(default_factory=dict)
    added_special_tokens: list[str] = field(default_factory=list)
    source_vocab_size: int = 0

    @property
    def vocab_size(self) -> int:
        """Number of ids of the adapted tokenizer (before any padding of the embedding matrix)."""
        return len(self.tokenizer)


def _source_special_contents(source_tokenizer: Any) -> list[str]:
    added = source_tokenizer.backend_tokenizer.get_added_tokens_decoder()
    return [token.content for _, token in sorted(added.items()) if token.special]


def replace_vocabulary(source_tokenizer: Any, target_tokenizer: Any) -> VocabularyReplacement:
    """Adapt ``target_tokenizer`` to stand in for ``source_tokenizer`` in the source model.

    The target is copied, never changed. Source special tokens missing from the target are appended as special
    tokens (after all target ids); roles and bos/eos insertion follow the source; the chat template is the
    source's (the target's own if the source has none).
    """
    from tokenizers import AddedToken

    adapted = copy.deepcopy(target_tokenizer)
    present = set(adapted.get_vocab())
    missing = [content for content in _source_special_contents(source_tokenizer) if content not in present]
    for role in SPECIAL_ROLES:
        content = getattr(source_tokenizer, f"{role}_token", None)
        if content and str(content) not in present and str(content) not in missing:
            missing.append(str(content))
    if missing:
        adapted.backend_tokenizer.add_special_tokens(
            [AddedToken(content, special=True, normalized=False) for content in missing]
        )
    for role in SPECIAL_ROLES:
        content = getattr(source_tokenizer, f"{role}_token", None)
        if content:
            setattr(adapted, f"{role}_token", str(content))
    add_bos, add_eos = inserts_bos_eos(source_tokenizer)
    adapted.add_bos_token, adapted.add_eos_token = add_bos, add_eos
    if getattr(source_tokenizer, "chat_template", None):
        adapted.chat_template = source_tokenizer.chat_template
    overlap = token_overlap(source_tokenizer, adapted)
    shared = overlap.target_to_source
    return VocabularyReplacement(
        tokenizer=adapted,
        target_to_source=shared,
        new_token_ids=[token_id for token_id in range(len(adapted)) if token_id not in shared],
        overlap=overlap,
        special_token_ids={role: ids[0] for role, ids in overlap.special_roles.items()},
        source_special_token_ids={role: ids[1] for role, ids in overlap.special_roles.items()},
        added_special_tokens=missing,
        source_vocab_size=len(source_tokenizer),
    )


def embedding_rows(vocab_size: int, source_config_vocab: int, source_vocab_size: int, multiple: int | None) -> int:
    """Rows of the new embedding matrix: the vocabulary padded as the source padded its own.

    A source whose matrix has more rows than its tokenizer has ids was padded to a multiple; the largest power of
    two up to 128 that divides its row count is taken as that multiple unless ``multiple`` is given.
    """
    if multiple is None:
        multiple = 1
        if source_config_vocab > source_vocab_size:
            multiple = max(m for m in (1, 2, 4, 8, 16, 32, 64, 128) if source_config_vocab % m == 0)
    return math.ceil(vocab_size / multiple) * multiple


def updated_model_config(config: Any, replacement: VocabularyReplacement, *, pad_to_multiple_of: int | None = None):
    """A copy of a transformers model config with the adapted vocabulary size and special token ids.

    ``vocab_size`` becomes the adapted tokenizer's size, padded to the source's multiple; ``bos/eos/pad_token_id``
    (ints or lists, as Llama-3.1's eos list) are translated from source ids to adapted ids.
    """
    updated = copy.deepcopy(config)
    updated.vocab_size = embedding_rows(
        replacement.vocab_size, config.vocab_size, replacement.source_vocab_size, pad_to_multiple_of
    )
    source_to_adapted: dict[int, int] = {}
    for adapted_id, source_id in sorted(replacement.target_to_source.items()):
        source_to_adapted.setdefault(source_id, adapted_id)

    def translate(role: str, source_id: int) -> int | None:
        if replacement.source_special_token_ids.get(role) == source_id:  # pad and eos may share a source id
            return replacement.special_token_ids[role]
        return source_to_adapted.get(source_id)

    for role in ("bos", "eos", "pad"):
        value = getattr(config, f"{role}_token_id", None)
        if isinstance(value, int):
            setattr(updated, f"{role}_token_id", translate(role, value))
        elif isinstance(value, (list, tuple)):
            setattr(updated, f"{role}_token_id", [t for t in (translate(role, v) for v in value) if t is not None])
    return updated
