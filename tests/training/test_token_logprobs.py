"""Log-probabilities slab by slab: the same numbers and gradients as the full logits, without storing them."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from vocadapt.components.training.token_logprobs import causal_lm_loss, next_token_logprobs

BATCH, LENGTH, HIDDEN, VOCAB = 3, 37, 16, 101


@pytest.fixture()
def world():
    torch.manual_seed(0)
    hidden = torch.randn(BATCH, LENGTH, HIDDEN, dtype=torch.float64, requires_grad=True)
    head = torch.nn.Linear(HIDDEN, VOCAB, bias=True).double()
    ids = torch.randint(0, VOCAB, (BATCH, LENGTH))
    mask = torch.ones(BATCH, LENGTH, dtype=torch.long)
    mask[1, 30:] = 0
    return hidden, head, ids, mask


@pytest.mark.parametrize("slab", [1, 8, 64])
def test_causal_lm_loss_and_gradients_equal_the_full_logits(world, slab):
    hidden, head, ids, mask = world
    chunked = causal_lm_loss(hidden, head, ids, mask, slab=slab)
    grads = torch.autograd.grad(chunked, [hidden, head.weight, head.bias])
    logits = head(hidden[:, :-1])
    labels = ids[:, 1:].masked_fill((mask[:, 1:] * mask[:, :-1]) == 0, -100)
    full = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
    expected = torch.autograd.grad(full, [hidden, head.weight, head.bias])
    assert float(chunked.detach()) == pytest.approx(float(full.detach()), abs=1e-10)
    for got, want in zip(grads, expected):
        assert torch.allclose(got, want, atol=1e-5, rtol=0)


def test_word_start_mass_equals_the_full_softmax(world):
    hidden, head, ids, _ = world
    mask = torch.zeros(VOCAB - 7, dtype=torch.bool)  # shorter than the head: padded rows do not start words
    mask[::3] = True
    logp, mass = next_token_logprobs(hidden, head, ids, word_start_mask=mask, slab=10)
    probabilities = head(hidden).softmax(-1)
    full = torch.cat([mask, torch.zeros(7, dtype=torch.bool)])
    assert torch.allclose(mass.exp(), probabilities[..., full].sum(-1), atol=1e-6)
    assert torch.allclose(logp.exp(), probabilities.gather(-1, ids.unsqueeze(-1)).squeeze(-1), atol=1e-6)


def test_autograd_never_stores_a_batch_by_length_by_vocabulary_tensor(world):
    """Peak memory does not grow with batch x length x vocabulary: what autograd keeps for the backward pass is
    at most one slab's logits (during recomputation) and never the whole sequence's."""
    hidden, head, ids, mask = world
    saved: list[int] = []

    def pack(tensor):
        saved.append(tensor.numel())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss = causal_lm_loss(hidden, head, ids, mask, slab=4)
    assert saved and max(saved) < BATCH * (LENGTH - 1) * VOCAB / 4
    loss.backward()
    assert hidden.grad is not None


def test_without_gradients_nothing_is_checkpointed(world):
    hidden, head, ids, _ = world
    with torch.no_grad():
        logp, mass = next_token_logprobs(hidden, head, ids, slab=5)
    assert mass is None and not logp.requires_grad and logp.shape == (BATCH, LENGTH)
