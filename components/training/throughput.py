"""Honest throughput: real tokens only, and MFU against the device's dense bf16 peak.

Pad tokens are not tokens; the H100's peak is 989 TFLOP/s dense, not the 1979 sparse figure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

# Dense (not 2:4-sparse) bf16 tensor-core peaks per device, FLOP/s. H100 SXM: 989e12, not 1979e12.
DENSE_BF16_PEAK = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "A10G": 125e12, "L4": 121e12}


def detect_peak_flops() -> float | None:
    """The dense bf16 peak of CUDA device 0, or None (CPU, unknown card): then MFU is not reported."""
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name(0)
    return next((peak for key, peak in DENSE_BF16_PEAK.items() if key in name), None)


def flops_per_token(model: nn.Module, sequence_length: int) -> float:
    """Training FLOPs per token: 6 N + 12 L d T (PaLM appendix B).

    N counts the parameters that do matrix products: every parameter except an untied input embedding (a lookup);
    a tied embedding is counted once, as the LM head. L layers, d hidden size, T sequence length.
    """
    config = model.config
    params = {id(p): p.numel() for p in model.parameters()}
    embedding = model.get_input_embeddings().weight
    head = model.get_output_embeddings()
    if head is None or head.weight is not embedding:
        params.pop(id(embedding), None)
    layers, hidden = config.num_hidden_layers, config.hidden_size
    return 6 * sum(params.values()) + 12 * layers * hidden * sequence_length


@dataclass(frozen=True)
class TrainingFlops:
    """Training FLOPs per token, split by what the backward pass computes for each parameter.

    A matrix that trains costs 6 FLOPs per parameter and token (forward 2, gradient of its input 2, gradient of its
    weight 2); a frozen one costs 4: the gradient still flows through it to the trained parameters below (every
    strategy trains the input embeddings, at the bottom), but no weight gradient is computed. Attention's
    products cost 12 L d T per token (PaLM appendix B) whatever trains.
    """

    trained_parameters: int
    frozen_parameters: int
    attention: int

    @property
    def per_token(self) -> int:
        return 6 * self.trained_parameters + 4 * self.frozen_parameters + self.attention


def training_flops(model: nn.Module, sequence_length: int, extra: Iterable[nn.Module] = ()) -> TrainingFlops:
    """What one training token costs ``model`` as its parameters' ``requires_grad`` flags stand now.

    Args:
        model: a causal LM, possibly LoRA-wrapped (the adapters count as their own matrices, the frozen base
            weights under them as frozen).
        sequence_length: tokens per sequence (attention's cost grows with it).
        extra: modules outside the model that run on every token, e.g. the multi-token-prediction head.

    The input embedding is a lookup and costs nothing, unless it is tied to the LM head (then it is the head's
    matrix, counted once).
    """
    from vocadapt.components.training.strategies import base_causal_lm

    base = base_causal_lm(model)
    embedding = base.get_input_embeddings().weight
    head = base.get_output_embeddings()
    lookup_only = head is None or head.weight is not embedding
    trained = frozen = 0
    seen: set[int] = set()
    for module in (model, *extra):
        for param in module.parameters():
            if id(param) in seen or (lookup_only and param is embedding):
                continue
            seen.add(id(param))
            if param.requires_grad:
                trained += param.numel()
            else:
                frozen += param.numel()
    config = base.config
    return TrainingFlops(trained, frozen, 12 * config.num_hidden_layers * config.hidden_size * sequence_length)


def forward_flops_per_token(model: nn.Module, sequence_length: int) -> int:
    """FLOPs per token of a forward pass alone (a distillation teacher): 2 N + 4 L d T."""
    flops = training_flops(model, sequence_length)
    return 2 * (flops.trained_parameters + flops.frozen_parameters) + flops.attention // 3


def compile_decoder_layers(model: nn.Module, backend: str = "inductor") -> int:
    """torch.compile every decoder layer in place (``nn.Module.compile``, per block as torchtitan does): norms,
    rotary and the gated MLP fuse; the parameters stay the module's own, so DDP's and DeepSpeed's gradient hooks,
    LoRA and the state dict are unchanged. Returns the number of layers compiled."""
    from vocadapt.components.training.strategies import transformer_layers

    layers = transformer_layers(model)
    for layer in layers:
        layer.compile(backend=backend)
    return len(layers)
