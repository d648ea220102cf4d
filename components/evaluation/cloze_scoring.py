"""Cloze items scored in memory, as lm-evaluation-harness scores a multiple-choice task, without its machinery.

For each item the model scores every choice as a continuation of the context (``context + " " + choice``): the
summed log-probability of the continuation's tokens. ``acc`` picks the highest sum; ``acc_bytes`` divides each sum
by the choice's UTF-8 length first (lm-eval's byte-length normalisation, the one the papers report), so a
tokenizer with longer tokens is not favoured. The continuation's tokens are those of the joint encoding after the
longest prefix it shares with the context's own encoding, so a merge across the boundary is scored, not split.

Used where a few items must be scored quickly and deterministically (the ``adapt`` pipeline's side-by-side
benchmark, ``benchmarks/recovery.py``); ``vocadapt evaluate`` runs the same items through lm-eval.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from vocadapt.components.evaluation.cloze import ClozeItem
from vocadapt.components.metrics.bits_per_byte import length_sorted_batches


def continuation_logprobs(model, tokenizer, pairs: Sequence[tuple[str, str]], *, batch_size: int = 8,
                          max_length: int = 512, progress: str | None = None) -> list[float]:
    """Summed log-probability of each ``continuation`` after its ``context`` (joined by a space), in nats.

    The context is cut from the left to fit ``max_length`` tokens; one BOS (else EOS) token goes first so the first
    token is predicted too, as in :mod:`vocadapt.components.metrics.bits_per_byte`. ``progress``: a progress bar
    over the batches with this title (none when None)."""
    from tqdm.auto import tqdm

    start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    rows: list[tuple[list[int], int]] = []  # (ids, index of the first continuation token)
    for context, continuation in pairs:
        context_ids = tokenizer(context, add_special_tokens=False)["input_ids"]
        joint = tokenizer(f"{context} {continuation}", add_special_tokens=False)["input_ids"]
        shared = _shared_prefix(context_ids, joint)
        ids = [start, *joint]
        first = shared + 1
        if len(ids) > max_length:
            cut = len(ids) - max_length
            ids, first = [start, *ids[cut + 1:]], max(1, first - cut)
        rows.append((ids, first))
    scores = [0.0] * len(rows)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:  # longest first, each batch padded to about its own length (the demo's 96 pairs: 5,600 positions, not 7,632)
        for indices in tqdm(length_sorted_batches([len(ids) for ids, _ in rows], batch_size), desc=progress,
                            unit="batch", disable=progress is None):
            batch = [rows[index] for index in indices]
            width = max(len(ids) for ids, _ in batch)
            input_ids = torch.zeros((len(batch), width), dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for i, (ids, _) in enumerate(batch):
                input_ids[i, :len(ids)] = torch.tensor(ids)
                mask[i, :len(ids)] = 1
            with torch.no_grad():
                logits = model(input_ids=input_ids.to(device), attention_mask=mask.to(device)).logits.float()
            logp = torch.log_softmax(logits[:, :-1], dim=-1)
            targets = input_ids[:, 1:].to(device)
            token_logp = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
            for i, (index, (ids, first)) in enumerate(zip(indices, batch)):
                scores[index] = float(token_logp[i, first - 1:len(ids) - 1].sum())
    finally:
        model.train(was_training)
    return scores


def score_cloze(model, tokenizer, items: Sequence[ClozeItem], *, batch_size: int = 8) -> dict[str, float]:
    """``acc`` and ``acc_bytes`` (fractions in [0, 1]) of ``model`` on ``items``."""
    correct, correct_bytes = score_cloze_items(model, tokenizer, items, batch_size=batch_size)
    return {"acc": sum(correct) / len(items), "acc_bytes": sum(correct_bytes) / len(items)}


def score_cloze_items(model, tokenizer, items: Sequence[ClozeItem], *, batch_size: int = 8,
                      progress: str | None = None) -> tuple[list[int], list[int]]:
    """Per item, 1 where the true ending scores highest, else 0: by summed log-likelihood and per byte.
    ``progress``: a progress bar over the batches with this title."""
    if not items:
        raise ValueError("no cloze items to score: build some with build_cloze_items()")
    pairs = [(item.context, choice) for item in items for choice in item.choices]
    flat = continuation_logprobs(model, tokenizer, pairs, batch_size=batch_size, progress=progress)
    correct, correct_bytes = [], []
    position = 0
    for item in items:
        sums = flat[position:position + len(item.choices)]
        position += len(item.choices)
        per_byte = [score / max(len(choice.encode("utf-8")), 1) for score, choice in zip(sums, item.choices)]
        correct.append(int(max(range(len(sums)), key=sums.__getitem__) == item.label))
        correct_bytes.append(int(max(range(len(per_byte)), key=per_byte.__getitem__) == item.label))
    return correct, correct_bytes


def _shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
