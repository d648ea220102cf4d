"""Vocabulary expansion: new tokens appended to a BPE tokenizer as real vocabulary entries with merges.

Two recipes from the papers:
- "Design choices" §3.1: append ΔV = V' − V from a target tokenizer V', after all existing ids and with lower
  priority than every existing merge (``expand_with_target``);
- "0.01GB" §3: add the k most frequent new tokens of an auxiliary tokenizer trained on the target corpus
  (``expand_with_top_k``; k ∈ {50, 100, 500, 1000, 5000} in §7.4).

Both work on byte-level BPE (GPT-2, Llama-3 with ``ignore_merges``, SmolLM2) and sentencepiece BPE (Gemma; merges
ordered by piece score, so appending a merge last is giving its piece the lowest score). Not ``add_tokens``
(added tokens bypass the BPE model and the normaliser): each new token gets the merges that build it from what the
tokenizer already produces for its text (without them BPE never emits it), found by ``plan_merges`` and checked by
replaying BPE before it is kept. The JSON of the source is edited in place, so flags such as ``ignore_merges`` and
``byte_fallback`` survive (rebuilding Llama-3's BPE from vocabulary and merges drops ``ignore_merges``).
New tokens take ids after the highest id in use, and every added token (Llama-3's specials above the vocabulary,
Gemma-3's inside it) keeps its id, content and flag: ``check_ids_kept`` refuses a result where one moved.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vocadapt.components.collector import collector_paused
from vocadapt.components.errors import UserError
from vocadapt.components.tokenizers._backend import backend_json, piece_encoding, scheme_of
from vocadapt.components.tokenizers._merges import MergeTable, ProtectedWords, plan_merges
from vocadapt.components.tokenizers._source_splits import SourceSplits
from vocadapt.components.tokenizers.canonical import CanonicalToken, canonical_index, canonical_tokens
from vocadapt.components.tokenizers.fertility import count_tokens
from vocadapt.components.tokenizers.saving import record_added_tokens


SPLITS_REASON = "would join digits, spaces or symbols the source keeps apart"


@dataclass
class VocabularyExpansion:
    """An expanded tokenizer; ids below ``source_vocab_size`` are the source's, unchanged.

    Attributes:
        tokenizer: the expanded transformers fast tokenizer (source config, chat template and specials kept).
        new_token_ids: every appended id, ascending (requested tokens and the intermediates they needed).
        intermediate_token_ids: appended ids that were not requested but are needed to build requested ones.
        skipped: reason -> number of candidate tokens not added.
        source_vocab_size: ``len(source_tokenizer)``.
    """

    tokenizer: Any
    new_token_ids: list[int]
    intermediate_token_ids: list[int]
    skipped: dict[str, int] = field(default_factory=dict)
    source_vocab_size: int = 0

    @property
    def target_to_source(self) -> dict[int, int]:
        """Old ids keep their rows: the identity on the source's ids."""
        return {token_id: token_id for token_id in range(self.source_vocab_size)}


def delta_vocabulary(source_tokenizer: Any, target_tokenizer: Any) -> list[CanonicalToken]:
    """ΔV = V' − V: the target's non-special tokens absent from the source, in the target's priority (id) order."""
    source = canonical_index(source_tokenizer)
    return [
        form
        for form in canonical_tokens(target_tokenizer)
        if form is not None and not form.special and form not in source
    ]


def top_k_new_tokens(
    source_tokenizer: Any, auxiliary_tokenizer: Any, documents: Sequence[str], *, batch_size: int = 512
) -> list[CanonicalToken]:
    """Auxiliary tokens absent from the source, most frequent first on ``documents`` (ties: lower id first).

    Tokens that never occur are left out; take the first k (``expand_with_top_k`` does).
    """
    ids = count_tokens(auxiliary_tokenizer, list(documents), batch_size=batch_size)
    forms = canonical_tokens(auxiliary_tokenizer)
    counts = np.bincount(np.concatenate(ids), minlength=len(forms)) if ids else np.zeros(len(forms), dtype=int)
    source = canonical_index(source_tokenizer)
    order = sorted(
        (token_id for token_id in np.flatnonzero(counts).tolist() if forms[token_id] is not None),
        key=lambda token_id: (-int(counts[token_id]), token_id),
    )
    return [forms[i] for i in order if not forms[i].special and forms[i] not in source]


def expand_with_target(source_tokenizer: Any, target_tokenizer: Any, **options) -> VocabularyExpansion:
    """Append ΔV of ``target_tokenizer`` ("Design choices" §3.1); options as :func:`expand_vocabulary`."""
    return expand_vocabulary(source_tokenizer, delta_vocabulary(source_tokenizer, target_tokenizer), **options)


def expand_with_top_k(
    source_tokenizer: Any, auxiliary_tokenizer: Any, documents: Sequence[str], k: int, **options
) -> VocabularyExpansion:
    """Add the k most frequent new tokens of an auxiliary tokenizer on the corpus ("0.01GB" §3). ``k`` is used as
    given: below 1 or above the auxiliary tokenizer's size it is refused, never capped."""
    if not 1 <= k <= len(auxiliary_tokenizer):
        from vocadapt.components.errors import UserError

        raise UserError(f"top-k {k}: the target tokenizer has {len(auxiliary_tokenizer):,} tokens, so k must be "
                        f"between 1 and {len(auxiliary_tokenizer):,}; give a k in that range (or none to append "
                        "every new token)")
    candidates = top_k_new_tokens(source_tokenizer, auxiliary_tokenizer, documents)
    return expand_vocabulary(source_tokenizer, candidates, max_new_tokens=k, **options)


def expand_vocabulary(
    source_tokenizer: Any,
    candidates: Sequence[CanonicalToken],
    *,
    max_new_tokens: int | None = None,
    protect: Sequence[str] | ProtectedWords | None = None,
    protect_words: Iterable[str] | None = None,
    keep_source_splits: bool = True,
) -> VocabularyExpansion:
    """Append candidate tokens (in order) to a BPE tokenizer, each with the merges that make it reachable.

    Args:
        source_tokenizer: a byte-level or sentencepiece BPE fast tokenizer.
        candidates: new tokens in priority order (earlier ones get higher-priority merges).
        max_new_tokens: stop once this many ids are appended (intermediates count); None: all candidates.
        protect: source-language documents whose tokenization must stay exactly as before. Without it, a new
            token that is also a source-language word (a name shared by both languages: 'ĠHebron') changes
            how that word is tokenized; with it, such candidates are skipped. Several expansions of one source
            tokenizer can share the result of :func:`protected_source_text` here instead.
        protect_words: a source-language lexicon (a word list such as Debian's ``wamerican``): each word is
            protected as written, lower-case, capitalised and upper-case, after a space and without one, so that
            English text never seen in ``protect`` keeps its tokenization too (see :func:`lexicon_texts`).
        keep_source_splits: refuse new tokens that join what no source token joins (two digits, a space and a
            digit, a run of spaces or symbols the source splits), so numbers, dates, versions, prices and code keep
            their source tokenization without being listed (see :class:`SourceSplits`). On by default.

    Raises:
        ValueError: the tokenizer is not a BPE model this module can extend.
    """
    data = backend_json(source_tokenizer)
    model = data["model"]
    scheme = scheme_of(source_tokenizer)
    if model.get("type") != "BPE" or scheme.spelling not in ("bytelevel", "metaspace"):
        raise ValueError(
            f"vocabulary expansion needs a byte-level or sentencepiece BPE tokenizer, not {scheme.model} "
            f"({scheme.spelling}); replace the vocabulary instead (vocadapt tokenizer train + replace)"
        )
    if model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
        raise ValueError("BPE with a continuing-subword prefix or end-of-word suffix cannot be expanded")
    check_source_ids(data)
    _hold_added_tokens(data)
    table = MergeTable.from_model(model)
    spelled = _spell(source_tokenizer, candidates)
    if isinstance(protect, ProtectedWords):
        guard = protect
    elif protect or protect_words is not None:
        guard = protected_source_text(source_tokenizer, protect or [], protect_words)
    else:
        guard = None
    splits = SourceSplits(source_tokenizer) if keep_source_splits else None
    added, intermediates, skipped = _grow(table, spelled, max_new_tokens, guard, splits)
    tokenizer, ids = _build(source_tokenizer, data, added, table.added)
    check_ids_kept(source_tokenizer, tokenizer, dict(zip(added, ids)))
    position = {token: token_id for token, token_id in zip(added, ids)}
    return VocabularyExpansion(
        tokenizer=tokenizer,
        new_token_ids=ids,
        intermediate_token_ids=sorted(position[token] for token in intermediates),
        skipped=dict(skipped),
        source_vocab_size=len(source_tokenizer),
    )


def _spell(source_tokenizer: Any, candidates: Sequence[CanonicalToken]) -> list[str | None]:
    """Each candidate in the source model's alphabet ('ĠperchÃ©' / '▁perché'); None if it is not one pre-token."""
    spelled: list[str | None] = []
    with piece_encoding(source_tokenizer) as backend:
        for form in candidates:
            try:
                text = form.text_bytes.decode("utf-8")
            except UnicodeDecodeError:
                spelled.append(None)
                continue
            normalized = backend.normalizer.normalize_str(text) if backend.normalizer else text
            pieces = backend.pre_tokenizer.pre_tokenize_str(normalized) if backend.pre_tokenizer else [(text, None)]
            spelled.append(pieces[0][0] if len(pieces) == 1 and text else None)
    return spelled


def lexicon_texts(words: Iterable[str]) -> list[str]:
    """Every casing of every word (as listed, lower, Capitalised, UPPER), each alone and after a space.

    A pre-tokenizer tells a word after a space ('Ġword', '▁word') from one with nothing before it (the first word
    of a text, after a bracket or a newline); both are protected. Order is kept and duplicates dropped.
    """
    texts: dict[str, None] = {}
    for word in words:
        word = word.strip()
        if not word:
            continue
        for casing in (word, word.lower(), word.capitalize(), word.upper()):
            texts[casing] = None
            texts[" " + casing] = None
    return list(texts)


def protected_source_text(
    source_tokenizer: Any, documents: Sequence[str], lexicon: Iterable[str] | None = None
) -> ProtectedWords:
    """Source-language documents and lexicon words as the expansion guard: every distinct pre-token with the pieces
    the source tokenizer gives it (its own BPE, in Rust). Seconds per million lexicon entries: build it once when
    expanding one source tokenizer several times."""
    texts = list(documents) + (lexicon_texts(lexicon) if lexicon is not None else [])
    model = source_tokenizer.backend_tokenizer.model
    ignore_merges = bool(getattr(model, "ignore_merges", False))  # not backend_json: seconds at Gemma-3's 262K
    with collector_paused():  # a tuple per pre-token and per adjacent pair: no cycles (components/collector.py)
        words = _pre_tokens(source_tokenizer, texts)
        return ProtectedWords(((word, [t.value for t in model.tokenize(word)]) for word in sorted(words)),
                              ignore_merges=ignore_merges)  # fmt: skip


def _pre_tokens(source_tokenizer: Any, documents: Sequence[str]) -> set[str]:
    """The distinct pre-tokens of documents, in the model's alphabet, exactly as the tokenizer splits them."""
    backend = source_tokenizer.backend_tokenizer
    words: set[str] = set()
    for document in documents:
        normalized = backend.normalizer.normalize_str(document) if backend.normalizer else document
        pieces = backend.pre_tokenizer.pre_tokenize_str(normalized) if backend.pre_tokenizer else [(normalized, 0)]
        words.update(piece for piece, _ in pieces)
    return words


def _grow(table: MergeTable, spelled: Sequence[str | None], budget: int | None, guard: ProtectedWords | None,
          splits: SourceSplits | None = None):
    """Add candidates one by one; keep each only if BPE replay produces it (and everything before still works)."""
    added: list[str] = []
    intermediates: list[str] = []
    skipped: Counter[str] = Counter()
    from tqdm.auto import tqdm

    progress = tqdm(spelled, desc="expanding vocabulary", unit=" candidates", disable=len(spelled) < 2000,
                    mininterval=1.0, leave=False)  # fmt: skip
    for token in progress:
        if budget is not None and len(added) >= budget:
            break
        if token is None:
            skipped["not one pre-token of the source (or partial UTF-8)"] += 1
            continue
        if token in table.vocab:
            skipped["already in the vocabulary (or added as an intermediate)"] += 1
            continue
        characters = [character for character in dict.fromkeys(token) if character not in table.vocab]
        mark = len(table.added)
        table.vocab.update(characters)  # new characters are single-symbol tokens: no merge needed
        pieces = table.encode_word(token)
        merges, middle = plan_merges(pieces, table.vocab) if len(pieces) > 1 else ([], [])
        table.vocab.difference_update(characters)
        new = [c for c in characters if c != token] + middle + [token]
        if budget is not None and len(added) + len(new) > budget:
            skipped["over the budget of new tokens"] += 1
            continue
        appended = [pair for pair in dict.fromkeys(merges) if pair not in table.ranks]
        if splits is not None and any(splits.refuses(piece) for piece in new):
            skipped[SPLITS_REASON] += 1
            continue
        if guard is not None and guard.changed_by(appended, new, characters):
            skipped["would change protected source-language text"] += 1
            continue
        table.vocab.update(new)
        for left, right in merges:
            table.append(left, right)
        if any(table.encode_word(piece) != [piece] for piece in new):
            table.rollback(mark, new)
            skipped["not reachable with appended merges"] += 1
            continue
        added.extend(new)
        intermediates.extend(new[:-1])
    return added, intermediates, skipped


def _build(source_tokenizer: Any, data: dict, added: list[str], merges: list[tuple[str, str]]):
    """Write the new entries into the source's tokenizer.json and load it with the source's other files."""
    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

    with collector_paused():  # the merges and vocabulary rebuilt, saved and loaded (components/collector.py)
        model = data["model"]
        taken = list(model["vocab"].values()) + [token["id"] for token in data.get("added_tokens", [])]
        first = max(taken, default=-1) + 1  # after the highest id in use: Gemma-3's <image_soft_token> is 262144
        ids = list(range(first, first + len(added)))
        model["vocab"].update(zip(added, ids))
        existing = model.get("merges", [])
        stored_as_pairs = bool(existing) and not isinstance(existing[0], str)
        as_pairs = stored_as_pairs or any(" " in left or " " in right for left, right in merges)
        if as_pairs and not stored_as_pairs:  # a new merge holds a space: "a b" strings would be ambiguous
            existing = [_pair(entry) for entry in existing]
        model["merges"] = existing + [[l, r] if as_pairs else f"{l} {r}" for l, r in merges]
        with tempfile.TemporaryDirectory() as folder:
            source_tokenizer.save_pretrained(folder)
            Path(folder, "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
            # spares the load a parse of the file in Python; without legacy, Mistral's splits text after "<s>"
            # differently
            record_added_tokens(folder, data.get("added_tokens") or [], source_tokenizer)
            tokenizer = load_pretrained_tokenizer(folder)
    return tokenizer, ids


def check_source_ids(data: dict) -> None:
    """Refuse, before any work, a tokenizer whose ids are ambiguous: an added token whose id a different vocabulary
    entry holds, one the vocabulary holds at another id, or two added tokens on one id. Expanding it would write a
    tokenizer that decodes one id two ways.

    Added tokens inside the vocabulary at their own id (Gemma-3's 6,414, DeepSeek-V3's first three) and gaps in
    the ids are fine; they are handled by :func:`_hold_added_tokens`.
    """
    vocab = data["model"]["vocab"]
    id_to_piece = {token_id: piece for piece, token_id in vocab.items()}
    seen: dict[int, str] = {}
    for token in data.get("added_tokens", []):
        content, token_id = token["content"], token["id"]
        if vocab.get(content, token_id) != token_id:
            raise UserError(
                f"the source tokenizer's added token {content!r} has id {token_id}, but its vocabulary holds it at "
                f"id {vocab[content]}; fix its tokenizer.json so that both say the same id")
        holder = id_to_piece.get(token_id)
        if holder is not None and holder != content:
            raise UserError(
                f"the source tokenizer's added token {content!r} has id {token_id}, which its vocabulary gives to "
                f"{holder!r}: one id, two tokens (a vocabulary that skips ids makes `tokenizers` number added "
                "tokens onto used ones). Fix its tokenizer.json: number the vocabulary without gaps, or list "
                f"{content!r} in the vocabulary at a free id")
        if token_id in seen:
            raise UserError(
                f"the source tokenizer's added tokens {seen[token_id]!r} and {content!r} share id {token_id}; "
                "fix its tokenizer.json so that every added token has its own id")
        seen[token_id] = content


def _hold_added_tokens(data: dict) -> None:
    """Put every added token into the BPE vocabulary at its own id (``data`` is changed in place).

    ``tokenizers`` gives an added token that its model's vocabulary lacks the id ``len(vocab)`` when it loads a
    tokenizer.json; once new tokens are appended after Llama-3's specials (128,000-128,255), ``len(vocab)`` is no
    longer 128,000 and the specials move onto the new tokens' ids (seen: ``<|begin_of_text|>`` 128000 -> 133000
    with 5,000 new tokens). An added token found in the vocabulary keeps that id. No merge builds these entries, so
    BPE never emits them; the added-token pass matches them as before.
    """
    vocab = data["model"]["vocab"]
    for token in data.get("added_tokens", []):
        vocab.setdefault(token["content"], token["id"])


def check_ids_kept(source_tokenizer: Any, tokenizer: Any, new_ids: dict[str, int]) -> None:
    """Raise unless the expanded tokenizer kept every added token (id, content, special flag), every role's token
    and id, and the chat template, and every new token sits at its own id. Never write a tokenizer whose
    specials moved: the model's rows and its config's bos/eos ids are keyed on them."""
    before = source_tokenizer.backend_tokenizer.get_added_tokens_decoder()
    after = tokenizer.backend_tokenizer.get_added_tokens_decoder()
    problems = [
        f"{token.content!r} {token_id} -> {tokenizer.convert_tokens_to_ids(token.content)}"
        for token_id, token in before.items()
        if token_id not in after or (after[token_id].content, after[token_id].special) != (token.content, token.special)
    ]
    for role in ("bos", "eos", "pad", "unk"):
        old, new = (
            (str(getattr(t, f"{role}_token", None)), getattr(t, f"{role}_token_id", None))
            for t in (source_tokenizer, tokenizer)
        )
        if old != new:
            problems.append(f"{role} {old} -> {new}")
    backend = tokenizer.backend_tokenizer
    problems += [f"new token {piece!r} {token_id} -> {backend.token_to_id(piece)}" for piece, token_id in
                 new_ids.items() if backend.token_to_id(piece) != token_id or token_id in after]  # fmt: skip
    if getattr(source_tokenizer, "chat_template", None) != getattr(tokenizer, "chat_template", None):
        problems.append("the chat template changed")
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise RuntimeError(f"the expanded tokenizer moved special or added tokens ({shown}); nothing was written")


def _pair(entry: Any) -> list[str]:
    return entry.split(" ", 1) if isinstance(entry, str) else list(entry)


def unreachable_tokens(tokenizer: Any, token_ids: Sequence[int]) -> list[int]:
    """The ids among ``token_ids`` that are not produced when their own text is encoded (should be none)."""
    forms = canonical_tokens(tokenizer)
    texts = [forms[token_id].text_bytes.decode("utf-8", errors="replace") for token_id in token_ids]
    with piece_encoding(tokenizer) as backend:
        encoded = backend.encode_batch_fast(texts, add_special_tokens=False)
    return [token_id for token_id, encoding in zip(token_ids, encoded) if encoding.ids != [token_id]]
