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

from vocadapt.components.errors import UserError
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
        added_template_tokens: ordinary (not special) added tokens of the source that its chat template writes
            (Qwen3's ``<think>``, DeepSeek-V3's ``<｜User｜>``), that the target lacked and that were appended.
        source_vocab_size: ``len(source_tokenizer)``.
    """

    tokenizer: Any
    target_to_source: dict[int, int]
    new_token_ids: list[int]
    overlap: TokenOverlap
    special_token_ids: dict[str, int] = field(default_factory=dict)
    source_special_token_ids: dict[str, int] = field(default_factory=dict)
    added_special_tokens: list[str] = field(default_factory=list)
    added_template_tokens: list[str] = field(default_factory=list)
    source_vocab_size: int = 0

    @property
    def vocab_size(self) -> int:
        """Number of ids of the adapted tokenizer (before any padding of the embedding matrix)."""
        return len(self.tokenizer)


def _source_special_contents(source_tokenizer: Any) -> list[str]:
    added = source_tokenizer.backend_tokenizer.get_added_tokens_decoder()
    return [token.content for _, token in sorted(added.items()) if token.special]


def _template_tokens(source_tokenizer: Any) -> list[Any]:
    """The source's ordinary added tokens that its chat template writes (as ``AddedToken``s, flags kept)."""
    template = getattr(source_tokenizer, "chat_template", None) or ""
    added = source_tokenizer.backend_tokenizer.get_added_tokens_decoder()
    return [token for _, token in sorted(added.items()) if not token.special and token.content in template]


def replace_vocabulary(source_tokenizer: Any, target_tokenizer: Any) -> VocabularyReplacement:
    """Adapt ``target_tokenizer`` to stand in for ``source_tokenizer`` in the source model.

    The target is copied, never changed. Source special tokens missing from the target are appended as special
    tokens (after all target ids), and so are the ordinary added tokens the source's chat template writes (Qwen3's
    ``<think>``, with their flags); a source special the target holds as a normal token becomes special at its id.
    Roles and bos/eos insertion follow the source; the chat template is the source's (the target's own if the
    source has none). Raises unless every one of those tokens ends up mapped to its source id.
    """
    from tokenizers import AddedToken

    adapted = copy.deepcopy(target_tokenizer)
    present = set(adapted.get_vocab())
    highest = max(adapted.get_vocab().values(), default=-1)
    missing = [content for content in _source_special_contents(source_tokenizer) if content not in present]
    for role in SPECIAL_ROLES:
        content = getattr(source_tokenizer, f"{role}_token", None)
        if content and str(content) not in present and str(content) not in missing:
            missing.append(str(content))
    target_specials = {t.content for t in adapted.backend_tokenizer.get_added_tokens_decoder().values() if t.special}
    ordinary_in_target = [content for content in _source_special_contents(source_tokenizer)
                          if content in present and content not in target_specials]  # fmt: skip
    if missing or ordinary_in_target:  # one the target has as a normal token becomes special at the same id
        adapted.backend_tokenizer.add_special_tokens(
            [AddedToken(content, special=True, normalized=False) for content in missing + ordinary_in_target]
        )
    ordinary = [token for token in _template_tokens(source_tokenizer) if token.content not in present]
    if ordinary:  # without them the template's <think> would be spelled out in pieces and lose its source row
        adapted.backend_tokenizer.add_tokens(ordinary)
    appended = {content: adapted.convert_tokens_to_ids(content) for content in missing + [t.content for t in ordinary]}
    if any(token_id is None or token_id <= highest for token_id in appended.values()):  # a gap in the target's ids
        raise UserError(f"appending the source's special tokens to the target tokenizer gave them ids already in use "
                        f"({appended}); the target's vocabulary skips ids: save it with its ids numbered without gaps")
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
    _check_carried(source_tokenizer, adapted, shared)
    return VocabularyReplacement(
        tokenizer=adapted,
        target_to_source=shared,
        new_token_ids=[token_id for token_id in range(len(adapted)) if token_id not in shared],
        overlap=overlap,
        special_token_ids={role: ids[0] for role, ids in overlap.special_roles.items()},
        source_special_token_ids={role: ids[1] for role, ids in overlap.special_roles.items()},
        added_special_tokens=missing,
        added_template_tokens=[token.content for token in ordinary],
        source_vocab_size=len(source_tokenizer),
    )


def _check_carried(source_tokenizer: Any, adapted: Any, shared: dict[int, int]) -> None:
    """Raise unless every special token of the source, and every added token its chat template writes, is in the
    adapted tokenizer with the same special flag and mapped to its source id (its row is the source's)."""
    source_added = source_tokenizer.backend_tokenizer.get_added_tokens_decoder()
    adapted_added = adapted.backend_tokenizer.get_added_tokens_decoder()
    template = getattr(source_tokenizer, "chat_template", None) or ""
    problems = []
    for source_id, token in source_added.items():
        if not (token.special or token.content in template):
            continue
        token_id = adapted.convert_tokens_to_ids(token.content)
        carried = adapted_added.get(token_id)
        if carried is None or carried.special != token.special or shared.get(token_id) != source_id:
            problems.append(f"{token.content!r} (source id {source_id}, adapted id {token_id})")
    if problems:
        raise RuntimeError(f"the adapted tokenizer lost the source's special tokens or their rows: "
                           f"{', '.join(problems[:5])}{' ...' if len(problems) > 5 else ''}")


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
