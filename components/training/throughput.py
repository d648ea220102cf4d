"""Honest throughput: real tokens only, and MFU against the device's dense bf16 peak.

Pad tokens are not tokens; the H100's peak is 989 TFLOP/s dense, not the 1979 sparse figure.
"""

from __future__ import annotations

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


def compile_decoder_layers(model: nn.Module, backend: str = "inductor") -> int:
    """torch.compile every decoder layer in place (``nn.Module.compile``, per block as torchtitan does): norms,
    rotary and the gated MLP fuse; the parameters stay the module's own, so DDP's and DeepSpeed's gradient hooks,
    LoRA and the state dict are unchanged. Returns the number of layers compiled."""
    from vocadapt.components.training.strategies import transformer_layers

    layers = transformer_layers(model)
    for layer in layers:
        layer.compile(backend=backend)
    return len(layers)
