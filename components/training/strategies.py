"""Which parameters LAPT trains: the strategies of "0.01GB" §5 and "Design choices" §3.2.

- ``full``: every parameter.
- ``lora``: LoRA adapters (peft) on every linear layer of the transformer, plus the input embeddings and the LM head
  trained in full (the new vocabulary lives there).
- ``two-stage``: first only the input embeddings and the LM head (at ``stage_one_learning_rate``), then ``full`` or
  ``lora`` (``second_stage``).
- ``2x2-ls``: the bottom two and top two transformer layers, plus embeddings and head (Remy et al. 2024).
- ``new-head``: only the LM-head rows an expansion added, fitted on the frozen model's hidden states
  (``head_fit.py``; not a loop of optimizer steps over the model).
- ``new-rows``: only the input-embedding and LM-head rows an expansion added, in the loop, by the configured
  objective (:class:`NewRows`): the source rows and the body stay byte for byte, and the optimizer holds only the
  new rows.

With the ``mtp`` objective the extra prediction head is trained in every stage.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from vocadapt.components.training.settings import LaptSettings


@dataclass(frozen=True)
class Stage:
    kind: str  # full | lora | embeddings | 2x2-ls | new-head | new-rows
    steps: int
    learning_rate: float
    warmup_steps: int
    schedule: str


def plan_stages(settings: LaptSettings, total_steps: int) -> list[Stage]:
    """The stages of a run, their step counts summing to ``total_steps``."""
    if settings.strategy != "two-stage":
        kind = {"full": "full", "lora": "lora", "2x2-ls": "2x2-ls", "embeddings": "embeddings",
                "new-head": "new-head", "new-rows": "new-rows"}[settings.strategy]
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
    elif kind == "new-rows":
        chosen = [p for name, p in model.named_parameters() if name.rsplit(".", 1)[-1] == NewRows.ATTRIBUTE]
        if not chosen:
            raise ValueError("stage kind 'new-rows' trains the rows NewRows.install added; install it first")
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


class NewRows:
    """Strategy ``new-rows``: during training, the input embedding and the LM head keep their matrices frozen and
    read the rows an expansion added from small trainable ``[new, hidden]`` parameters instead.

    - the input embedding's output at a new id is that id's row of ``embedding_rows`` (times the module's
      ``embed_scale`` where it has one, as Gemma's scaled embedding does); at an old id it is the frozen row;
    - the LM head's logits are the frozen matrix's, with the columns of the new ids replaced by
      ``hidden @ head_rows.T`` (a head bias stays frozen, new entries included).

    Both are forward hooks on the model's own modules, so nothing else changes: the slabbed losses call the head
    module, DDP and DeepSpeed ZeRO-1/2 see ordinary parameters. A tied model has one block, registered on both
    modules (it stays tied); an untied model has two, each started from its own matrix's rows. Only these blocks
    receive gradients (each one a ``positions x new x hidden`` product, not the whole vocabulary's) and only they
    reach the optimizer, so its state is ``[new, hidden]``-sized. The logits of old ids depend only on the frozen
    rows and on hidden states the body computes from them: on text tokenized with source tokens only, they stay
    byte-identical, and the source model's distribution over its own vocabulary moves only through the new
    entries' share of the softmax. ``write_back()`` copies the trained rows into the matrices and removes the
    hooks and blocks, leaving the model's usual layout (what checkpoints and the registry expect).

    ZeRO-3 partitions the matrices, and writing rows back needs them whole: not supported (the loop refuses it).
    """

    ATTRIBUTE = "vocadapt_new_rows"  # the trainable block's name on each module (kept out of saved models)

    def __init__(self, model: nn.Module, new_ids: list[int]) -> None:
        base = base_causal_lm(model)
        self.embedding, self.head = base.get_input_embeddings(), base.get_output_embeddings()
        if self.head is None or not isinstance(self.head, nn.Linear) or not isinstance(self.embedding, nn.Embedding):
            raise ValueError("strategy 'new-rows' needs an nn.Embedding input embedding and an nn.Linear LM head; "
                             f"this model has {type(self.embedding).__name__} and {type(self.head).__name__}")
        rows = self.embedding.weight.shape[0]
        ids = sorted(set(new_ids))
        if not ids:
            raise ValueError("strategy 'new-rows' trains the rows an expansion added, and it added none")
        if ids[0] < 0 or ids[-1] >= min(rows, self.head.weight.shape[0]):
            raise ValueError(f"new token ids {ids[0]}..{ids[-1]} are outside the matrices' {rows} rows")
        device = self.embedding.weight.device
        self.new_ids = torch.tensor(ids, dtype=torch.long, device=device)
        self.is_new = torch.zeros(rows, dtype=torch.bool, device=device)
        self.is_new[self.new_ids] = True
        self.column = torch.zeros(rows, dtype=torch.long, device=device)  # id -> its row in the block
        self.column[self.new_ids] = torch.arange(len(ids), device=device)
        self.tied = self.head.weight is self.embedding.weight
        with torch.no_grad():
            self.embedding_rows = nn.Parameter(self.embedding.weight[self.new_ids].clone())
            self.head_rows = self.embedding_rows if self.tied else nn.Parameter(self.head.weight[self.new_ids].clone())
        self.embedding.register_parameter(self.ATTRIBUTE, self.embedding_rows)
        self.head.register_parameter(self.ATTRIBUTE, self.head_rows)
        self.handles = [self.embedding.register_forward_hook(self._embed, with_kwargs=True),
                        self.head.register_forward_hook(self._logits, with_kwargs=True)]

    @classmethod
    def install(cls, model: nn.Module, new_ids: list[int]) -> NewRows:
        """Hooks and blocks on ``model``'s embedding and head, the blocks started from the new ids' rows."""
        return cls(model, new_ids)

    @property
    def parameters(self) -> list[nn.Parameter]:
        """The trainable blocks: one (tied) or two (untied), each ``[new, hidden]``."""
        return [self.embedding_rows] if self.tied else [self.embedding_rows, self.head_rows]

    def _embed(self, module: nn.Module, args: tuple, kwargs: dict, output: torch.Tensor) -> torch.Tensor:
        ids = args[0] if args else kwargs["input"]
        new = F.embedding(self.column.to(ids.device)[ids], self.embedding_rows)
        scale = getattr(module, "embed_scale", None)
        if scale is not None:
            new = new * scale.to(new.dtype)
        return torch.where(self.is_new.to(ids.device)[ids].unsqueeze(-1), new.to(output.dtype), output)

    def _logits(self, module: nn.Module, args: tuple, kwargs: dict, output: torch.Tensor) -> torch.Tensor:
        hidden = args[0] if args else kwargs["input"]
        bias = module.bias[self.new_ids.to(output.device)] if module.bias is not None else None
        new = F.linear(hidden, self.head_rows.to(hidden.dtype), bias)
        # in place: a linear layer keeps its input and weight for the backward pass, never its output, so no second
        # batch x length x vocabulary tensor is made (gradients reach the old columns' input path masked, as they should)
        return output.index_copy_(-1, self.new_ids.to(output.device), new.to(output.dtype))

    @torch.no_grad()
    def write_back(self, keep_rows: bool = True) -> None:
        """The trained rows into the matrices (``keep_rows``; else they are dropped); hooks and blocks removed.
        A second call does nothing."""
        for handle in self.handles:
            handle.remove()
        self.handles = []
        for module, rows in ((self.embedding, self.embedding_rows), (self.head, self.head_rows)):
            if self.ATTRIBUTE in module._parameters:
                if keep_rows:
                    module.weight[self.new_ids.to(module.weight.device)] = rows.detach().to(module.weight.dtype)
                del module._parameters[self.ATTRIBUTE]
