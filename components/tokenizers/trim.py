"""Trim a BPE tokenizer to the tokens some languages' text uses (vocabulary trimming, Ushio et al. 2023).

Kept: every token the corpus produces at least ``min_count`` times (or the most frequent ones, up to ``size``
tokens in all), every special token, every added token and every token of the text the chat template writes, the
byte alphabet (byte-level BPE: its 256 byte symbols; sentencepiece-style BPE with byte fallback: the 256 ``<0xNN>``
pieces; otherwise every one-character piece), every token that is only whitespace (line breaks, tabs, runs of
spaces: one-paragraph-per-line corpora never show them), and, for each kept token, the characters and intermediate
tokens BPE builds it from (:class:`MergeTrees`). Merges are kept when both parts and the result are kept.

Why the tokenization of kept text does not change: BPE applies, over and over, the lowest-ranked merge among
adjacent symbols. Every merge the source applies to a word of kept text builds a kept token or one a kept token is
built from, so the trim keeps it; the trimmed merges are a subset in the same order, so the lowest-ranked one at
each step is the same, and when the source has none left the subset has none either. Text with dropped tokens still
encodes: into the pieces of the kept merges, down to characters and then bytes.

Kept tokens take new ids in the order of their source ids (so Gemma-3's ``<pad>``, ``<eos>``, ``<bos>`` and
``<unk>`` keep ids 0..3); ``target_to_source`` maps each new id to its source id, whose rows the surgery copies.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vocadapt.components.errors import UserError
from vocadapt.components.tokenizers._backend import backend_json, backend_of, bytes_to_unicode, scheme_of
from vocadapt.components.tokenizers._merges import merge_pair
from vocadapt.components.tokenizers.saving import record_added_tokens


@dataclass
class VocabularyTrim:
    """A trimmed tokenizer and how it maps onto the source.

    tokenizer: the trimmed tokenizer (a transformers fast tokenizer).
    target_to_source: trimmed id -> source id, for every trimmed id.
    new_token_ids: always empty (a trim copies every row); kept so a trim reads like a replacement or expansion.
    counts: source id -> occurrences in the corpus, for the tokens the corpus produced.
    kept_by: why tokens were kept: counts of "corpus", "special", "bytes", "merge parts".
    """

    tokenizer: Any
    target_to_source: dict[int, int]
    source_vocab_size: int
    min_count: int | None
    size: int | None
    counts: dict[int, int] = field(default_factory=dict)
    kept_by: dict[str, int] = field(default_factory=dict)
    new_token_ids: list[int] = field(default_factory=list)

    @property
    def vocab_size(self) -> int:
        return len(self.tokenizer)

    def record(self) -> dict[str, Any]:
        """What the trim kept and why, for the output folder and the logs."""
        total = sum(self.counts.values())
        kept_ids = set(self.target_to_source.values())
        kept = sum(count for source_id, count in self.counts.items() if source_id in kept_ids)
        return {
            "source_vocab_size": self.source_vocab_size, "vocab_size": self.vocab_size, "min_count": self.min_count,
            "size": self.size, "kept_by": dict(self.kept_by), "corpus_tokens": total,
            "corpus_token_share_kept": round(kept / total, 6) if total else None,
        }


def count_token_ids(tokenizer: Any, documents: Iterable[str], *, batch_size: int = 1024) -> Counter:
    """Occurrences of each token id in ``documents`` (no special tokens inserted)."""
    backend = backend_of(tokenizer)
    counts: Counter = Counter()
    batch: list[str] = []
    for document in documents:
        batch.append(document)
        if len(batch) == batch_size:
            for encoding in backend.encode_batch(batch, add_special_tokens=False):
                counts.update(encoding.ids)
            batch = []
    for encoding in backend.encode_batch(batch, add_special_tokens=False) if batch else ():
        counts.update(encoding.ids)
    return counts


def _always_kept(tokenizer: Any, data: dict, vocab: dict[str, int]) -> tuple[set[int], set[int]]:
    """(special and chat-template ids, byte-alphabet ids) that every trim keeps."""
    template = getattr(tokenizer, "chat_template", None) or ""
    template = template if isinstance(template, str) else json.dumps(template)
    specials = {token["id"] for token in data.get("added_tokens", []) if token["special"] or token["content"] in template}
    for role in ("bos", "eos", "pad", "unk"):
        token_id = getattr(tokenizer, f"{role}_token_id", None)
        if isinstance(token_id, int):
            specials.add(token_id)
    if data["model"].get("unk_token") in vocab:
        specials.add(vocab[data["model"]["unk_token"]])
    specials |= _chat_template_ids(tokenizer)
    scheme = scheme_of(tokenizer)
    if scheme.spelling == "bytelevel":
        alphabet = {vocab[symbol] for symbol in bytes_to_unicode().values() if symbol in vocab}
    elif scheme.byte_fallback:
        alphabet = {vocab[piece] for piece in (f"<0x{byte:02X}>" for byte in range(256)) if piece in vocab}
    else:  # no byte fallback: a dropped character would become unknown, so every character stays
        alphabet = {token_id for piece, token_id in vocab.items() if len(piece) == 1}
    return specials, alphabet | whitespace_ids(vocab, scheme.spelling)


def whitespace_ids(vocab: dict[str, int], spelling: str) -> set[int]:
    """The tokens that are only whitespace (line breaks, tabs, runs of spaces). Corpora are read one paragraph per
    line, so they never hold a line break, yet a model writes them: trimmed by the corpus alone, Gemma-3-270M lost
    ``\n`` and ``\n\n`` and its greedy continuation changed where the source's started a new paragraph."""
    if spelling == "bytelevel":
        to_byte = {symbol: byte for byte, symbol in bytes_to_unicode().items()}

        def text_of(piece: str) -> str:
            return bytes(to_byte.get(symbol, 0) for symbol in piece).decode("utf-8", errors="replace")
    else:
        def text_of(piece: str) -> str:
            return piece.replace("\u2581", " ")
    return {token_id for piece, token_id in vocab.items() if (text := text_of(piece)) and text.isspace()}


def _chat_template_ids(tokenizer: Any) -> set[int]:
    """The tokens of the chat template's own text (role names, turn markers), rendered around empty messages: a
    deployment's prompts always hold them, whatever the corpus."""
    if not getattr(tokenizer, "chat_template", None):
        return set()
    found: set[int] = set()
    roles = (["system", "user", "assistant"], ["user", "assistant"], ["user"])
    for conversation in roles:
        for generation_prompt in (False, True):
            try:
                text = tokenizer.apply_chat_template([{"role": role, "content": ""} for role in conversation],
                                                     tokenize=False, add_generation_prompt=generation_prompt)
            except Exception:  # a template may refuse a role order (no system turn); the others still render
                continue
            found.update(backend_of(tokenizer).encode(text, add_special_tokens=False).ids)
    return found


class MergeTrees:
    """For each token, the tokens BPE builds on the way to it: the merges it applies to the token's own text.

    Inside a word, the merges that build a token never cross the token's edges, so they are applied in the same
    order as when BPE encodes the token's text alone: replaying that (lowest rank first, then leftmost) gives every
    intermediate token, and the characters it starts from. A token BPE does not build from its own text (an added
    token, or one only ``ignore_merges`` emits whole) needs nothing."""

    def __init__(self, model: dict, vocab: dict[str, int]) -> None:
        self.vocab = vocab
        self.pairs = [merge_pair(entry) for entry in model.get("merges", [])]
        self.ranks: dict[tuple[str, str], int] = {}
        for rank, pair in enumerate(self.pairs):
            self.ranks.setdefault(pair, rank)
        self.piece_of = {token_id: piece for piece, token_id in vocab.items()}

    def parts(self, token_id: int) -> list[int]:
        """The characters and intermediate tokens BPE goes through to build ``token_id`` from its text."""
        piece = self.piece_of.get(token_id)
        if piece is None or len(piece) < 2:
            return []
        symbols = list(piece)
        formed = [self.vocab[symbol] for symbol in symbols if symbol in self.vocab]
        while len(symbols) > 1:
            candidates = [(self.ranks.get((left, right)), index)
                          for index, (left, right) in enumerate(zip(symbols, symbols[1:]))]
            candidates = [candidate for candidate in candidates if candidate[0] is not None]
            if not candidates:
                return []  # BPE never builds this token from its text
            _, index = min(candidates)
            symbols[index : index + 2] = [symbols[index] + symbols[index + 1]]
            if symbols[index] not in self.vocab:
                return []
            formed.append(self.vocab[symbols[index]])
        return formed if symbols == [piece] else []


def _closure(token_id: int, trees: MergeTrees, kept: set[int]) -> set[int]:
    """``token_id`` and the tokens BPE builds it from, less what ``kept`` already holds."""
    if token_id in kept:
        return set()
    return ({token_id} | set(trees.parts(token_id))) - kept


def choose_kept_ids(counts: Counter, always: set[int], trees: MergeTrees, *,
                    min_count: int | None, size: int | None) -> tuple[set[int], dict[str, int]]:
    """The source ids a trim keeps, and how many were kept for each reason.

    min_count: keep every token seen at least this often. size: keep the most frequent tokens (ties: lower id
    first), each with the merge parts it needs, while the total stays within ``size``; a token whose parts would
    overflow it is skipped and the next one tried."""
    kept: set[int] = set()
    for token_id in sorted(always):
        kept |= _closure(token_id, trees, kept)
    reasons = {"special and bytes": len(kept)}
    if size is not None and len(kept) > size:
        raise UserError(f"--size {size:,} is smaller than the {len(kept):,} tokens every trim keeps (specials, the "
                        f"byte alphabet and their merge parts); give --size {len(kept):,} or more")
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    from_corpus = parts = 0
    for token_id, count in ranked:
        if min_count is not None and count < min_count:
            break
        if token_id in kept:
            continue
        added = _closure(token_id, trees, kept)
        if size is not None and len(kept) + len(added) > size:
            continue
        kept |= added
        from_corpus += 1
        parts += len(added) - 1
    reasons.update({"corpus": from_corpus, "merge parts": parts})
    return kept, reasons


def trim_tokenizer(tokenizer: Any, documents: Iterable[str], *, min_count: int | None = None,
                   size: int | None = None) -> VocabularyTrim:
    """Trim ``tokenizer`` (a BPE fast tokenizer) to what ``documents`` use; see the module docstring.

    Give ``min_count`` (default 1 when neither is given) or ``size``, not both.
    """
    if min_count is not None and size is not None:
        raise UserError("give a frequency threshold (--min-count) or a target size (--size), not both")
    if size is None and min_count is None:
        min_count = 1
    if min_count is not None and min_count < 1:
        raise UserError(f"--min-count must be at least 1, got {min_count}")
    if size is not None and size < 1:
        raise UserError(f"--size must be positive, got {size}")
    data = backend_json(tokenizer)
    model = data["model"]
    if model.get("type") != "BPE":
        raise UserError(f"only BPE tokenizers can be trimmed (byte-level BPE, sentencepiece-style BPE); this one is "
                        f"{model.get('type')}: trim a model with a BPE tokenizer")
    vocab: dict[str, int] = model["vocab"]
    counts = count_token_ids(tokenizer, documents)
    if not counts:
        raise UserError("the corpora hold no text: give non-empty --corpus files or other --language codes")
    if model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
        raise UserError("trimming a BPE with a continuing-subword prefix or an end-of-word suffix is not supported; "
                        "trim a byte-level or sentencepiece-style BPE tokenizer")
    trees = MergeTrees(model, vocab)
    specials, alphabet = _always_kept(tokenizer, data, vocab)
    kept, reasons = choose_kept_ids(counts, specials | alphabet, trees, min_count=min_count, size=size)
    source_size = len(backend_of(tokenizer).get_vocab(with_added_tokens=True))
    trimmed, target_to_source = _build(tokenizer, data, trees.pairs, kept)
    return VocabularyTrim(trimmed, target_to_source, source_size, min_count, size, dict(sorted(counts.items())),
                          reasons)


def _remap_post_processor(node: Any, new_id: dict[int, int]) -> Any:
    """The post-processor with every special token's ids moved to the trimmed ids."""
    if isinstance(node, dict):
        out = {key: _remap_post_processor(value, new_id) for key, value in node.items()}
        if "ids" in out and "tokens" in out and isinstance(out["ids"], list):
            out["ids"] = [new_id[token_id] for token_id in out["ids"]]
        return out
    if isinstance(node, list):
        return [_remap_post_processor(value, new_id) for value in node]
    return node


def _build(tokenizer: Any, data: dict, pairs: Sequence[tuple[str, str]], kept: set[int]):
    """The trimmed tokenizer.json written into a copy of the source's tokenizer files, and loaded."""
    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

    model = data["model"]
    order = sorted(kept)
    new_id = {source_id: target_id for target_id, source_id in enumerate(order)}
    model["vocab"] = {piece: new_id[token_id] for piece, token_id in sorted(model["vocab"].items(), key=lambda p: p[1])
                      if token_id in kept}
    pieces = model["vocab"]
    stored_as_pairs = bool(model.get("merges")) and not isinstance(model["merges"][0], str)
    merges = []
    for left, right in pairs:
        if left in pieces and right in pieces and left + right in pieces:
            merges.append([left, right] if stored_as_pairs else f"{left} {right}")
    model["merges"] = merges
    data["added_tokens"] = [dict(token, id=new_id[token["id"]]) for token in data.get("added_tokens", [])
                            if token["id"] in kept]
    if data.get("post_processor"):
        data["post_processor"] = _remap_post_processor(data["post_processor"], new_id)
    with tempfile.TemporaryDirectory() as folder:
        tokenizer.save_pretrained(folder)
        record_added_tokens(folder, data["added_tokens"], tokenizer)  # the new ids, not the source's
        for stale in ("tokenizer.model", "vocab.json", "merges.txt", "added_tokens.json"):
            Path(folder, stale).unlink(missing_ok=True)  # the slow files would describe the source's vocabulary
        Path(folder, "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        trimmed = load_pretrained_tokenizer(folder)
    _check_roles(tokenizer, trimmed, new_id)
    return trimmed, {target_id: source_id for source_id, target_id in new_id.items()}


def _check_roles(source: Any, trimmed: Any, new_id: dict[int, int]) -> None:
    """Every special role is played by the same token, at its new id."""
    for role in ("bos", "eos", "pad", "unk"):
        source_id = getattr(source, f"{role}_token_id", None)
        target_id = getattr(trimmed, f"{role}_token_id", None)
        expected = new_id.get(source_id) if isinstance(source_id, int) else None
        if target_id != expected:
            raise RuntimeError(f"the trimmed tokenizer's {role} token is id {target_id}, expected {expected} "
                               f"(source id {source_id})")
