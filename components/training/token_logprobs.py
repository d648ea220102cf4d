"""Next-token log-probabilities without ever holding the full logits.

A causal LM's head turns hidden states ``[batch, length, hidden]`` into logits ``[batch, length, vocabulary]``: at a
128K vocabulary, 8 sequences of 2,048 tokens that is 2.1 G floats (8 GiB in fp32) for one micro-batch, more than the
rest of a 1B model's activations. The losses of LAPT need only two numbers per position: the log-probability of the
token that follows, and (for ALM's debiasing) the probability mass of the tokens that start a word. This module
computes both slab by slab (``batch x slab x vocabulary`` at a time); under autograd every slab is checkpointed, so
its logits are recomputed in the backward pass instead of stored, and peak memory is one slab whatever the length.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch.utils.checkpoint import checkpoint

DEFAULT_SLAB = 256  # positions per slab: 8 x 256 x 128K fp32 logits is 1 GiB


def next_token_logprobs(
    hidden: torch.Tensor,
    head: Callable[[torch.Tensor], torch.Tensor],
    targets: torch.Tensor,
    *,
    word_start_mask: torch.Tensor | None = None,
    slab: int = DEFAULT_SLAB,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probability of ``targets`` and, optionally, of starting a word, at every position.

    Args:
        hidden: [batch, length, hidden] final hidden states (after the last norm).
        head: the LM head, hidden -> [.., vocabulary] logits (an ``nn.Linear``, a LoRA-wrapped head, ...).
        targets: [batch, length] the token each position predicts (the input shifted left by one); any id is
            accepted at positions the caller ignores.
        word_start_mask: [vocabulary] bool, the tokens that start a word (see ``alm.word_start_mask``); rows of
            the head beyond its length count as not starting a word.
        slab: positions per slab.

    Returns:
        ``(logp, word_start_logmass)``: [batch, length] in fp32 (fp64 for fp64 inputs) ``log p(targets | prefix)``, and
        ``log sum_{v in mask} p(v | prefix)`` (None without a mask).
    """
    length = hidden.shape[1]
    track = torch.is_grad_enabled() and hidden.requires_grad
    logps, masses = [], []
    for start in range(0, length, slab):
        piece = hidden[:, start:start + slab]
        piece_targets = targets[:, start:start + slab]
        if track:
            logp, mass = checkpoint(_slab_scores, head, piece, piece_targets, word_start_mask, use_reentrant=False)
        else:
            logp, mass = _slab_scores(head, piece, piece_targets, word_start_mask)
        logps.append(logp)
        masses.append(mass)
    logp = torch.cat(logps, dim=1)
    return logp, (torch.cat(masses, dim=1) if word_start_mask is not None else None)


def _slab_scores(head, hidden: torch.Tensor, targets: torch.Tensor, word_start_mask: torch.Tensor | None):
    logits = head(hidden)  # [batch, slab, vocabulary], alive only inside this function
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()  # softmax normalisers in at least fp32
    normaliser = torch.logsumexp(logits, dim=-1)
    logp = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - normaliser
    if word_start_mask is None:
        return logp, torch.zeros_like(logp)
    mask = _fit(word_start_mask, logits.shape[-1]).to(logits.device)
    mass = torch.logsumexp(logits.masked_fill(~mask, float("-inf")), dim=-1) - normaliser
    return logp, mass


def _fit(mask: torch.Tensor, size: int) -> torch.Tensor:
    """The mask padded with False (or cut) to the head's number of rows."""
    if mask.shape[0] >= size:
        return mask[:size]
    return torch.cat([mask, mask.new_zeros(size - mask.shape[0])])


def causal_lm_loss(hidden: torch.Tensor, head, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                   *, slab: int = DEFAULT_SLAB) -> torch.Tensor:
    """Mean next-token cross-entropy over real tokens, as ``F.cross_entropy`` on the full logits would give it.

    hidden: [batch, length, hidden]; input_ids, attention_mask: [batch, length]. Position t predicts token t + 1;
    a pair counts when both tokens are real (mask 1).
    """
    logp, _ = next_token_logprobs(hidden[:, :-1], head, input_ids[:, 1:], slab=slab)
    if attention_mask is None:
        return -logp.mean()
    keep = (attention_mask[:, 1:] * attention_mask[:, :-1]).to(logp.dtype)
    return -(logp * keep).sum() / keep.sum().clamp(min=1)
