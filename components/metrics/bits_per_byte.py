"""Bits per byte: the language-modelling loss that is comparable across tokenizers.

A model with fewer, longer tokens has a higher loss per token on the same text, so models with
different vocabularies are compared by the total information they spend on the text, normalised by the text's size
in UTF-8 bytes, which no tokenizer can change (nanochat ``loss_eval.py::evaluate_bpb`` does the same).

What is scored, exactly:

- each document is tokenized on its own, *without* special tokens (``add_special_tokens=False``), so a tokenizer
  that adds BOS/EOS scores the same content tokens as one that does not;
- one context token is put in front (the tokenizer's BOS, else its EOS) so the first content token is predicted
  too; that context token is never a target;
- every content token is a target exactly once: the summed next-token negative log-likelihood in nats;
- the denominator is ``ln 2 x`` the documents' UTF-8 bytes (``len(doc.encode("utf-8"))``).

Documents longer than ``max_length`` targets are cut into consecutive windows; each window's first prediction
sees only the token before it (the standard non-overlapping evaluation), so long documents score slightly worse
than with a sliding window. Windows are batched longest first (:func:`length_sorted_batches`) with right padding
that is masked out: in document order a short fortune shared a batch with a 128-token one and was padded to it
(the demo's 400 out-of-domain paragraphs: 44,600 positions computed for 18,900 scored; sorted, 19,800). A
window's loss does not depend on the others in its batch, beyond the last bits of the matrix products.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class BitsPerByte:
    """The parts of one bits-per-byte evaluation, so callers can log tokens and bytes as well."""

    nats: float  # summed next-token negative log-likelihood over every content token
    tokens: int  # content tokens scored
    bytes: int  # UTF-8 bytes of the scored documents

    @property
    def bits_per_byte(self) -> float:
        return self.nats / (math.log(2) * self.bytes)

    @property
    def nats_per_token(self) -> float:
        return self.nats / self.tokens


def bits_per_byte(model, tokenizer, documents: list[str], *, max_length: int = 256, batch_size: int = 8) -> float:
    """Summed next-token NLL over the documents' content tokens / (ln 2 x their UTF-8 bytes). See the module doc."""
    return score_bits_per_byte(model, tokenizer, documents, max_length=max_length, batch_size=batch_size).bits_per_byte


def score_bits_per_byte(
    model, tokenizer, documents: list[str], *, max_length: int = 256, batch_size: int = 8
) -> BitsPerByte:
    """Like :func:`bits_per_byte`, returning nats, tokens and bytes. Empty documents are skipped."""
    if max_length < 1 or batch_size < 1:
        raise ValueError(f"max_length and batch_size must be >= 1, got {max_length} and {batch_size}")
    documents = [doc for doc in documents if doc]
    if not documents:
        raise ValueError("no non-empty documents to score; pass held-out text, one document per string")
    context_id = _context_token_id(tokenizer)
    windows, total_tokens = [], 0
    for doc in documents:
        content = tokenizer(doc, add_special_tokens=False)["input_ids"]
        total_tokens += len(content)
        windows.extend(_windows([context_id, *content], max_length))
    total_bytes = sum(len(doc.encode("utf-8")) for doc in documents)
    nats = _summed_nll(model, windows, batch_size)
    return BitsPerByte(nats=nats, tokens=total_tokens, bytes=total_bytes)


def score_documents(
    model, tokenizer, documents: list[str], *, max_length: int = 256, batch_size: int = 8,
    progress: str | None = None,
) -> list[BitsPerByte]:
    """Like :func:`score_bits_per_byte`, one ``BitsPerByte`` per document, in order (windows are batched across
    documents the same way): what a bootstrap over documents resamples (``components/evaluation/bootstrap.py``).
    Their nats and bytes sum to :func:`score_bits_per_byte`'s. Empty documents are refused. ``progress``: a
    progress bar over the batches with this title (none when None)."""
    from tqdm.auto import tqdm

    if max_length < 1 or batch_size < 1:
        raise ValueError(f"max_length and batch_size must be >= 1, got {max_length} and {batch_size}")
    if not documents or any(not doc for doc in documents):
        raise ValueError("score_documents needs non-empty documents, one per string")
    context_id = _context_token_id(tokenizer)
    windows, owners, tokens = [], [], []
    for index, doc in enumerate(documents):
        content = tokenizer(doc, add_special_tokens=False)["input_ids"]
        tokens.append(len(content))
        parts = _windows([context_id, *content], max_length)
        windows.extend(parts)
        owners.extend([index] * len(parts))
    nats = [0.0] * len(documents)
    device = _model_device(model)
    was_training = getattr(model, "training", False)
    if hasattr(model, "eval"):
        model.eval()
    try:
        with torch.inference_mode():
            window_nats = [0.0] * len(windows)
            for batch in tqdm(_window_batches(windows, batch_size), desc=progress, unit="batch",
                              disable=progress is None):
                for index, value in zip(batch, _batch_nll_rows(model, [windows[i] for i in batch], device)):
                    window_nats[index] = value
            for owner, value in zip(owners, window_nats):  # each document's windows added in their order
                nats[owner] += value
    finally:
        if was_training:
            model.train()
    return [BitsPerByte(nats=value, tokens=count, bytes=len(doc.encode("utf-8")))
            for value, count, doc in zip(nats, tokens, documents)]


def _context_token_id(tokenizer) -> int:
    for name in ("bos_token_id", "eos_token_id"):
        token_id = getattr(tokenizer, name, None)
        if token_id is not None:
            return int(token_id)
    raise ValueError(
        "the tokenizer has neither a BOS nor an EOS token, so the first token of a document cannot be scored; "
        "set tokenizer.bos_token (or eos_token) before computing bits per byte"
    )


def _windows(ids: list[int], max_length: int) -> list[tuple[list[int], list[int]]]:
    """Split ``ids`` (context token first) into (inputs, targets) windows of at most ``max_length`` targets."""
    inputs, targets = ids[:-1], ids[1:]
    return [(inputs[s : s + max_length], targets[s : s + max_length]) for s in range(0, len(targets), max_length)]


def length_sorted_batches(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Indices of sequences of these ``lengths`` in batches of ``batch_size``, longest first (ties in their order):
    each batch is padded to about its own sequences' length, and the largest batch comes first, so a memory limit
    is met at once."""
    order = sorted(range(len(lengths)), key=lambda index: -lengths[index])
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


def _window_batches(windows: list[tuple[list[int], list[int]]], batch_size: int) -> list[list[int]]:
    """The windows' indices, batched longest first (both scorers of this module batch this way)."""
    return length_sorted_batches([len(inputs) for inputs, _ in windows], batch_size)


def _model_device(model) -> torch.device:
    try:
        return next(model.parameters()).device
    except (AttributeError, StopIteration):
        return torch.device("cpu")


@torch.inference_mode()
def _summed_nll(model, windows: list[tuple[list[int], list[int]]], batch_size: int) -> float:
    device = _model_device(model)
    was_training = getattr(model, "training", False)
    if hasattr(model, "eval"):
        model.eval()
    total = 0.0
    try:
        for batch in _window_batches(windows, batch_size):
            total += _batch_nll(model, [windows[i] for i in batch], device)
    finally:
        if was_training:
            model.train()
    return total


def _padded(batch: list[tuple[list[int], list[int]]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Windows as right-padded (batch, width) inputs, targets (-100 where padded) and attention mask."""
    width = max(len(inputs) for inputs, _ in batch)
    inputs = torch.zeros(len(batch), width, dtype=torch.long)
    targets = torch.full((len(batch), width), -100, dtype=torch.long)
    mask = torch.zeros(len(batch), width, dtype=torch.long)
    for row, (window_inputs, window_targets) in enumerate(batch):
        inputs[row, : len(window_inputs)] = torch.tensor(window_inputs)
        targets[row, : len(window_targets)] = torch.tensor(window_targets)
        mask[row, : len(window_inputs)] = 1
    return inputs, targets, mask


def _batch_nll(model, batch: list[tuple[list[int], list[int]]], device: torch.device) -> float:
    """Summed NLL of one batch. inputs, targets: (batch, width) right-padded; padded targets are -100."""
    inputs, targets, mask = _padded(batch)
    logits = model(input_ids=inputs.to(device), attention_mask=mask.to(device)).logits  # (batch, width, vocab)
    # float32 log-softmax: bf16 logits lose ~2 decimal digits of the per-token loss
    return F.cross_entropy(
        logits.float().flatten(0, 1), targets.to(device).flatten(), ignore_index=-100, reduction="sum"
    ).item()


def _batch_nll_rows(model, batch: list[tuple[list[int], list[int]]], device: torch.device) -> list[float]:
    """Summed NLL of each window of one batch (float32 log-softmax, as :func:`_batch_nll`)."""
    inputs, targets, mask = _padded(batch)
    logits = model(input_ids=inputs.to(device), attention_mask=mask.to(device)).logits
    losses = F.cross_entropy(logits.float().transpose(1, 2), targets.to(device), ignore_index=-100, reduction="none")
    return losses.sum(dim=1).tolist()
