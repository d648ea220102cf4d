"""Multi-token prediction with one extra head ("0.01GB" §5, after Gloeckle et al. 2024).

The causal LM's own head predicts token t+1 from the last hidden state at t; an extra linear head, initialised as a
copy of the LM head (the paper's Appendix E.3 finds random initialisation worse), predicts token t+2 from the same
hidden state. The training loss is the mean of the two heads' losses; the next-token loss is reported on its own so
that curves stay comparable with plain CLM. The extra head is dropped when the model is saved.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from vocadapt.components.training.strategies import base_causal_lm


@dataclass
class MtpOutput:
    loss: torch.Tensor  # mean of the next-token and next-next-token losses
    next_token_loss: torch.Tensor
    logits: torch.Tensor  # (batch, length, vocab), the main head's


class MultiTokenPrediction(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        head = base_causal_lm(model).get_output_embeddings()
        self.extra_head = nn.Linear(head.in_features, head.out_features, bias=head.bias is not None)
        with torch.no_grad():  # a copy, never tied: the two heads must be free to differ
            self.extra_head.weight.copy_(head.weight)
            if head.bias is not None:
                self.extra_head.bias.copy_(head.bias)
        self.extra_head.to(head.weight.device, head.weight.dtype)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, labels=None,
                use_cache: bool = False, **model_kwargs) -> MtpOutput:
        """input_ids: (batch, length). Targets are the inputs shifted by one and by two.

        Without ``labels`` this is the wrapped model's own forward (``model_kwargs`` passed on), for objectives that
        apply the heads themselves (distillation) while the forward still runs through DDP's or DeepSpeed's
        wrapper of this module.
        """
        if labels is None:
            return self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=use_cache, **model_kwargs)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True,
                         use_cache=use_cache)
        hidden = out.hidden_states[-1]  # (batch, length, hidden), after the final norm
        next_loss = F.cross_entropy(out.logits[:, :-1].flatten(0, 1).float(), input_ids[:, 1:].flatten())
        second = self.extra_head(hidden[:, :-2])  # (batch, length - 2, vocab)
        second_loss = F.cross_entropy(second.flatten(0, 1).float(), input_ids[:, 2:].flatten())
        return MtpOutput((next_loss + second_loss) / 2, next_loss, out.logits)
