"""Special tokens and the transformers wrapper for a freshly built ``tokenizers.Tokenizer``.

A target tokenizer that replaces a model's vocabulary must carry the model's special tokens: the
roles bos/eos/pad/unk, the added tokens its chat template uses, the template itself, and whether bos/eos are
inserted on encode. ``plan_special_tokens(like=source)`` collects them; ``wrap_fast`` applies them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

ROLE_ATTRIBUTES = ("bos", "eos", "pad", "unk", "cls", "sep", "mask")

# (special tokens in id order, role -> token) for a tokenizer trained without ``like``.
DEFAULT_ROLES: dict[str, tuple[list[str], dict[str, str]]] = {
    "bytelevel-bpe": (["<|endoftext|>", "<pad>"], {"bos": "<|endoftext|>", "eos": "<|endoftext|>", "pad": "<pad>"}),
    "spm-bpe": (["<unk>", "<s>", "</s>", "<pad>"], {"unk": "<unk>", "bos": "<s>", "eos": "</s>", "pad": "<pad>"}),
    "spm-unigram": (["<unk>", "<s>", "</s>", "<pad>"], {"unk": "<unk>", "bos": "<s>", "eos": "</s>", "pad": "<pad>"}),
    "wordpiece": (
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
        {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"},
    ),
}
NEEDS_UNK = {"spm-bpe": "<unk>", "spm-unigram": "<unk>", "wordpiece": "[UNK]"}


@dataclass
class SpecialTokenPlan:
    """What special tokens a new tokenizer gets, in id order, and which role each plays."""

    tokens: list[str]
    roles: dict[str, str]
    chat_template: str | None = None
    add_bos: bool = False
    add_eos: bool = False
    bert_template: bool = False
    extra: list[str] = field(default_factory=list)
    ordinary: dict[str, dict[str, bool]] = field(default_factory=dict)
    """Added tokens of ``like`` that are not special (Qwen3's ``<think>``, DeepSeek-V3's ``<｜User｜>``, Gemma-3's
    ``<unused0>``): content -> their flags, so that the new tokenizer marks them as the source does."""


def inserts_bos_eos(tokenizer: Any) -> tuple[bool, bool]:
    """Whether encoding with special tokens adds bos at the start / eos at the end (measured, not assumed)."""
    with_special = tokenizer("a", add_special_tokens=True)["input_ids"]
    without = tokenizer("a", add_special_tokens=False)["input_ids"]
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    add_bos = bos is not None and with_special[:1] == [bos] and without[:1] != [bos]
    add_eos = eos is not None and with_special[-1:] == [eos] and without[-1:] != [eos]
    return add_bos, add_eos


def plan_special_tokens(like: Any, kind: str, extra: Sequence[str] | None) -> SpecialTokenPlan:
    """The special tokens of the kind's defaults, or those of ``like`` (a source tokenizer), plus ``extra``."""
    if like is None:
        tokens, roles = list(DEFAULT_ROLES[kind][0]), dict(DEFAULT_ROLES[kind][1])
        plan = SpecialTokenPlan(tokens, roles, bert_template="cls" in roles)
    else:
        added = like.backend_tokenizer.get_added_tokens_decoder() if hasattr(like, "backend_tokenizer") else {}
        tokens = [token.content for _, token in sorted(added.items())]
        ordinary = {token.content: _flags(token) for token in added.values() if not token.special}
        roles = {
            role: str(getattr(like, f"{role}_token"))
            for role in ROLE_ATTRIBUTES
            if getattr(like, f"{role}_token", None)
        }
        tokens += [token for token in roles.values() if token not in tokens]
        add_bos, add_eos = inserts_bos_eos(like)
        plan = SpecialTokenPlan(tokens, roles, getattr(like, "chat_template", None), add_bos, add_eos,
                                ordinary=ordinary)  # fmt: skip
        unk_default = NEEDS_UNK.get(kind)
        if unk_default and "unk" not in roles:  # sentencepiece and WordPiece cannot work without an unk piece
            plan.roles["unk"] = unk_default
            plan.tokens.append(unk_default)
    for token in extra or ():
        if token not in plan.tokens:
            plan.tokens.append(token)
            plan.extra.append(token)
    return plan


def wrap_fast(backend: Any, plan: SpecialTokenPlan, like: Any = None):
    """A transformers fast tokenizer around ``backend`` with the plan's roles, template and bos/eos insertion."""
    from tokenizers import AddedToken, processors
    from transformers import PreTrainedTokenizerFast

    missing = [token for token in plan.tokens if backend.token_to_id(token) is None]
    if missing:
        backend.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in missing])
    if plan.ordinary:
        backend = _with_flags(backend, plan.ordinary)
    kwargs: dict[str, Any] = {f"{role}_token": token for role, token in plan.roles.items()}
    if plan.bert_template:
        cls, sep = plan.roles["cls"], plan.roles["sep"]
        backend.post_processor = processors.TemplateProcessing(
            single=f"{cls} $A {sep}",
            pair=f"{cls} $A {sep} $B:1 {sep}:1",
            special_tokens=[(cls, backend.token_to_id(cls)), (sep, backend.token_to_id(sep))],
        )
    else:
        kwargs.update(add_bos_token=plan.add_bos, add_eos_token=plan.add_eos)
    if plan.extra:
        kwargs["extra_special_tokens"] = list(plan.extra)
    fast = PreTrainedTokenizerFast(tokenizer_object=backend, **kwargs)
    if plan.chat_template:
        fast.chat_template = plan.chat_template
    if like is not None:
        fast.model_max_length = like.model_max_length
    return fast


def _flags(token: Any) -> dict[str, bool]:
    return {name: bool(getattr(token, name)) for name in ("special", "normalized", "lstrip", "rstrip", "single_word")}


def _with_flags(backend: Any, flags: dict[str, dict[str, bool]]):
    """The backend with the given added tokens' flags set (through its JSON: ``tokenizers`` cannot change the flags
    of a token it holds). Trainers add every carried token as special; a source's ordinary added token left special
    would vanish from ``decode(skip_special_tokens=True)`` and lose its source row (overlap pairs a special token
    only with a special one). The tokens are in the vocabulary, so their ids do not change."""
    import json

    from tokenizers import Tokenizer

    from vocadapt.components.collector import parse_json

    data = parse_json(backend.to_str())
    for token in data["added_tokens"]:
        token.update(flags.get(token["content"], {}))
    rebuilt = Tokenizer.from_str(json.dumps(data, ensure_ascii=False))
    moved = {token: (backend.token_to_id(token), rebuilt.token_to_id(token)) for token in flags
             if backend.token_to_id(token) != rebuilt.token_to_id(token)}  # fmt: skip
    if moved:
        raise RuntimeError(f"setting the flags of added tokens moved them: {moved}")
    return rebuilt
