"""Exact training FLOPs per token for every strategy on a tiny model: 6 per trained and 4 per frozen parameter in
a matrix product, the input-embedding lookup free, adapters and the MTP head counted, the teacher's forward apart."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from vocadapt.components.training.mtp import MultiTokenPrediction
from vocadapt.components.training.settings import LaptSettings
from vocadapt.components.training.strategies import add_lora, set_trainable
from vocadapt.components.training.throughput import flops_per_token, forward_flops_per_token, training_flops

V, H, LAYERS, T = 120, 16, 6, 32
ATTENTION = 12 * LAYERS * H * T


def _model(tie: bool = False):
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=V, hidden_size=H, intermediate_size=24, num_hidden_layers=LAYERS,
                                        num_attention_heads=2, num_key_value_heads=2, tie_word_embeddings=tie))


def _sizes(model, keep):
    return sum(p.numel() for name, p in model.named_parameters() if keep(name))


def test_full_training_counts_every_matrix_six_times_and_skips_the_lookup():
    model = _model()
    set_trainable(model, "full")
    body = _sizes(model, lambda n: "embed_tokens" not in n)  # includes the head
    flops = training_flops(model, T)
    assert (flops.trained_parameters, flops.frozen_parameters) == (body, 0)
    assert flops.per_token == 6 * body + ATTENTION == flops_per_token(model, T)


def test_stage_one_trains_embeddings_and_head_and_runs_the_body_frozen():
    model = _model()
    set_trainable(model, "embeddings")
    body = _sizes(model, lambda n: "embed_tokens" not in n and "lm_head" not in n)
    assert training_flops(model, T).per_token == 6 * V * H + 4 * body + ATTENTION


def test_tied_head_is_counted_once_as_a_matrix():
    model = _model(tie=True)
    set_trainable(model, "embeddings")
    body = _sizes(model, lambda n: "embed_tokens" not in n and "lm_head" not in n)
    assert training_flops(model, T).per_token == 6 * V * H + 4 * body + ATTENTION


def test_2x2_ls_trains_four_layers():
    model = _model()
    set_trainable(model, "2x2-ls")
    chosen = {f"model.layers.{i}." for i in (0, 1, LAYERS - 2, LAYERS - 1)}
    trained = _sizes(model, lambda n: any(n.startswith(c) for c in chosen)) + V * H
    frozen = _sizes(model, lambda n: "embed_tokens" not in n and "lm_head" not in n
                    and not any(n.startswith(c) for c in chosen))
    assert training_flops(model, T).per_token == 6 * trained + 4 * frozen + ATTENTION


def test_lora_counts_adapters_as_trained_and_the_base_weights_under_them_as_frozen():
    model = add_lora(_model(), LaptSettings(strategy="lora", lora_rank=4))
    set_trainable(model, "lora")
    adapters = _sizes(model, lambda n: "lora_" in n)
    frozen = _sizes(model, lambda n: "lora_" not in n and "embed_tokens" not in n and "lm_head" not in n)
    assert adapters > 0
    assert training_flops(model, T).per_token == 6 * (adapters + V * H) + 4 * frozen + ATTENTION


def test_the_mtp_head_is_a_trained_matrix():
    model = _model()
    module = MultiTokenPrediction(model)
    set_trainable(model, "full", list(module.extra_head.parameters()))
    body = _sizes(model, lambda n: "embed_tokens" not in n)
    assert training_flops(model, T, [module.extra_head]).per_token == 6 * (body + V * H) + ATTENTION


@pytest.mark.parametrize("frozen", [True, False])
def test_a_teacher_costs_one_forward_pass(frozen):
    model = _model()
    for param in model.parameters():
        param.requires_grad_(not frozen)
    body = _sizes(model, lambda n: "embed_tokens" not in n)
    assert forward_flops_per_token(model, T) == 2 * body + 4 * LAYERS * H * T
