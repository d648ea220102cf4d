"""Which parameters LAPT trains: the strategies of "0.01GB" §5 and "Design choices" §3.2.

- ``full``: every parameter.
- ``lora``: LoRA adapters (peft) on every linear layer of the transformer, plus the input embeddings and the LM head
  trained in full (the new vocabulary lives there).
- ``two-stage``: first only the input embeddings and the LM head (at ``stage_one_learning_rate``), then ``full`` or
  ``lora`` (``second_stage``).
- ``2x2-ls``: the bottom two and top two transformer layers, plus embeddings and head (Remy et al. 2024).
- ``new-head``: only the LM-head rows an expansion added, fitted on the frozen model's hidden states
  (``head_fit.py``; not a loop of optimizer steps over the model).

With the ``mtp`` objective the extra prediction head is trained in every stage.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from vocadapt.components.training.settings import LaptSettings


@dataclass(frozen=True)
class Stage:
    kind: str  # full | lora | embeddings | 2x2-ls
    steps: int
    learning_rate: float
    warmup_steps: int
    schedule: str


def plan_stages(settings: LaptSettings, total_steps: int) -> list[Stage]:
    """The stages of a run, their step counts summing to ``total_steps``."""
    if settings.strategy != "two-stage":
        kind = {"full": "full", "lora": "lora", "2x2-ls": "2x2-ls", "embeddings": "embeddings",
                "new-head": "new-head"}[settings.strategy]
        return [Stage(kind, total_steps, settings.learning_rate, settings.warmup_steps, settings.schedule)]
    if total_steps < 2:
        raise ValueError("the two-stage strategy needs at least 2 steps; raise max_steps or max_tokens")
    first = settings.stage_one_steps or max(1, total_steps // 10)
    first = min(first, total_steps - 1)
    return [
        Stage("embeddings", first, settings.stage_one_learning_rate, min(settings.warmup_steps, first), "constant"),
        Stage(settings.second_stage, total_steps - first, settings.learning_rate, settings.warmup_steps,
              settings.schedule),
    ]


def uses_lora(settings: LaptSettings) -> bool:
    return settings.strategy == "lora" or (settings.strategy == "two-stage" and settings.second_stage == "lora")


def add_lora(model: nn.Module, settings: LaptSettings) -> nn.Module:
    """Wrap a causal LM with LoRA adapters on all linear layers (peft ``all-linear`` leaves the LM head out)."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=settings.lora_rank, lora_alpha=settings.lora_alpha, lora_dropout=settings.lora_dropout,
                        target_modules="all-linear", task_type="CAUSAL_LM")
    return get_peft_model(model, config)


def base_causal_lm(model: nn.Module) -> nn.Module:
    """The transformers model under a peft wrapper (or the model itself)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def transformer_layers(model: nn.Module) -> nn.ModuleList:
    """The decoder blocks: the ModuleList with ``config.num_hidden_layers`` entries."""
    base = base_causal_lm(model)
    count = base.config.num_hidden_layers
    for module in base.modules():
        if isinstance(module, nn.ModuleList) and len(module) == count:
            return module
    raise ValueError(f"found no list of {count} decoder layers in {type(base).__name__}; 2x2-ls and compile need one")


def embedding_parameters(model: nn.Module) -> list[nn.Parameter]:
    base = base_causal_lm(model)
    params = list(base.get_input_embeddings().parameters())
    head = base.get_output_embeddings()
    if head is not None:
        params += [p for p in head.parameters() if all(p is not q for q in params)]
    return params


def set_trainable(model: nn.Module, kind: str, extra: list[nn.Parameter] = ()) -> list[nn.Parameter]:
    """Freeze everything, then unfreeze what stage ``kind`` trains plus ``extra`` (the MTP head). Returns them."""
    for param in model.parameters():
        param.requires_grad_(False)
    if kind == "full":
        chosen = [p for name, p in model.named_parameters() if "lora_" not in name]
    elif kind == "lora":
        chosen = [p for name, p in model.named_parameters() if "lora_" in name] + embedding_parameters(model)
    elif kind == "embeddings":
        chosen = embedding_parameters(model)
    elif kind == "2x2-ls":
        layers = transformer_layers(model)
        if len(layers) < 4:
            raise ValueError(f"2x2-ls trains the bottom and top two layers; this model has only {len(layers)}")
        chosen = [p for index in (0, 1, len(layers) - 2, len(layers) - 1) for p in layers[index].parameters()]
        chosen += embedding_parameters(model)
    else:
        raise ValueError(f"unknown stage kind {kind!r}")
    for param in [*chosen, *extra]:
        param.requires_grad_(True)
    return trainable_parameters(model) + [p for p in extra if not any(p is q for q in trainable_parameters(model))]


def trainable_parameters(model: nn.Module) -> list[nn.Parameter]:
    """Unique parameters that require grad (a tied embedding and head count once)."""
    return [p for p in model.parameters() if p.requires_grad]


def count_parameters(params) -> int:
    seen, total = set(), 0
    for param in params:
        if id(param) not in seen:
            seen.add(id(param))
            total += param.numel()
    return total


@torch.no_grad()
def merge_lora(model: nn.Module) -> nn.Module:
    """The plain transformers model with LoRA folded in (embeddings and head were trained in place)."""
    return model.merge_and_unload() if hasattr(model, "merge_and_unload") else model
