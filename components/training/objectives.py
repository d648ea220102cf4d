"""What one LAPT micro-batch is trained to do: next-token prediction, distillation from the source model, or both.

- ``clm``: the student's next-token cross-entropy on its own packed rows (with ``mtp``, the extra head's
  next-next-token loss too, averaged with it).
- ``distill``: ALM (``alm.py``): the teacher, the source model with its own tokenizer, frozen and without
  gradients, reads the same text; the student matches its chunk likelihoods.
- ``clm+distill``: ``clm + distill_weight x distill``.

Every term is computed from the final hidden states slab by slab (``token_logprobs.py``), so no objective holds a
``batch x length x vocabulary`` tensor: the student's one forward pass gives both its next-token loss and its ALM
scores. Each call returns the loss to back-propagate and its terms, detached, for logging.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from vocadapt.components.training.alm import (
    AlmSettings, AlmSide, alm_loss, final_hidden_states, scores_from_hidden, sequence_scores, word_start_mask)
from vocadapt.components.training.distill_data import TeacherView
from vocadapt.components.training.token_logprobs import DEFAULT_SLAB, causal_lm_loss

TERMS = ("clm", "mtp", "distill")


def objective_terms(objective: str) -> frozenset[str]:
    """``"clm+distill"`` -> {"clm", "distill"}; ``"mtp"`` is next-token prediction with the extra head, so it
    implies ``clm``. Raises ValueError naming an unknown term."""
    terms = frozenset(term.strip() for term in objective.split("+"))
    unknown = sorted(terms - set(TERMS))
    if unknown or not terms:
        raise ValueError(f"unknown LAPT objective term(s) {unknown} in {objective!r}; combine {', '.join(TERMS)} "
                         "with '+', e.g. 'clm+distill'")
    return terms | ({"clm"} if "mtp" in terms else set())


@dataclass
class ObjectiveOutput:
    loss: torch.Tensor  # what the engine back-propagates
    terms: dict[str, torch.Tensor] = field(default_factory=dict)  # detached: next_token_loss, distill_loss, ...
    teacher_tokens: int = 0  # real teacher tokens read (for the teacher's share of the FLOPs)


class Distillation:
    """The teacher's side of ``distill``: the frozen source model, its tokenizer's view of each batch, and the
    word-start masks both sides need for ALM's debiasing."""

    def __init__(self, teacher: nn.Module, teacher_tokenizer, student_tokenizer, *,
                 max_teacher_length: int | None = None, alm: AlmSettings = AlmSettings(),
                 slab: int | None = None) -> None:
        """alm: ALM's temperature and debiasing threshold (None: every chunk on its own, no word-start term)."""
        self.teacher = teacher.eval()
        for param in self.teacher.parameters():
            param.requires_grad_(False)
        self.view = TeacherView(teacher_tokenizer, student_tokenizer, max_length=max_teacher_length)
        rows = teacher.get_input_embeddings().weight.shape[0]
        self.teacher_word_starts = word_start_mask(teacher_tokenizer, rows)
        self.student_word_starts = word_start_mask(student_tokenizer)
        self.alm = alm
        self.slab = slab

    def to(self, device) -> Distillation:
        self.teacher.to(device)
        return self


class LaptObjective:
    """One micro-batch's loss for the configured objective."""

    def __init__(self, objective: str = "clm", *, distillation: Distillation | None = None,
                 distill_weight: float = 1.0) -> None:
        self.terms = objective_terms(objective)
        if "distill" in self.terms and distillation is None:
            raise ValueError(f"objective {objective!r} distils from a teacher, but none was given")
        self.distillation, self.distill_weight = distillation, distill_weight

    def __call__(self, module: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> ObjectiveOutput:
        """module: the engine's module (the causal LM, wrapped by MTP, DDP or DeepSpeed as configured)."""
        if "distill" not in self.terms:
            out = module(input_ids=input_ids, attention_mask=attention_mask, labels=input_ids, use_cache=False)
            next_token = getattr(out, "next_token_loss", out.loss).detach().float()
            return ObjectiveOutput(out.loss, {"next_token_loss": next_token})
        return self._with_teacher(module, input_ids, attention_mask)

    def _with_teacher(self, module, input_ids, attention_mask) -> ObjectiveOutput:
        teach = self.distillation
        batch = teach.view(input_ids.cpu())
        device = input_ids.device
        with torch.no_grad():
            t_logp, t_word = sequence_scores(teach.teacher, batch.input_ids.to(device), batch.attention_mask.to(device),
                                             teach.teacher_word_starts.to(device), slab=teach.slab)
        lm = _causal_lm(module)
        s_logp, s_word, hidden = _student_scores(module, lm, input_ids, attention_mask,
                                                 teach.student_word_starts.to(device), teach.slab)
        distilled = alm_loss(AlmSide(t_logp, t_word, batch.chunks.to(device)),
                             AlmSide(s_logp, s_word, batch.student_chunks.to(device)), teach.alm)
        terms = {"distill_loss": distilled.loss.detach().float(),
                 "distill_groups": distilled.groups.detach().float()}
        loss = distilled.loss
        keep = (attention_mask[:, 1:] * attention_mask[:, :-1]).to(s_logp.dtype)
        next_token = -(s_logp[:, 1:] * keep).sum() / keep.sum().clamp(min=1)
        terms["next_token_loss"] = next_token.detach().float()  # logged under every objective, trained under clm
        if "clm" in self.terms:
            clm = next_token
            if "mtp" in self.terms:
                second = causal_lm_loss(hidden[:, :-1], _unwrapped(module).extra_head, input_ids[:, 1:],
                                        attention_mask[:, 1:], slab=teach.slab or DEFAULT_SLAB)
                terms["mtp_loss"] = second.detach().float()
                clm = (next_token + second) / 2
            loss = clm + self.distill_weight * distilled.loss
        return ObjectiveOutput(loss, terms, batch.real_tokens)


def _unwrapped(module: nn.Module) -> nn.Module:
    """The module inside DDP / DeepSpeed (they keep it as ``.module``): the causal LM or its MTP wrapper."""
    return getattr(module, "module", module)


def _causal_lm(module: nn.Module) -> nn.Module:
    """The causal LM inside DDP / DeepSpeed and the MTP wrapper."""
    inner = _unwrapped(module)
    return inner.model if hasattr(inner, "extra_head") else inner


def _student_scores(module, lm, input_ids, attention_mask, word_starts, slab):
    """The student's token log-probabilities and word-start mass, and its final hidden states.

    The forward goes through the engine's module, so DDP's gradient reduction and DeepSpeed's parameter gathering
    see it (the MTP wrapper passes a call without labels through to the LM); the heads are applied here, on the
    final hidden states, slab by slab. Their parameters' gradients still reach DDP's and DeepSpeed's hooks, which
    sit on the parameters, not on the forward."""
    hidden = final_hidden_states(module, input_ids, attention_mask)
    token_logp, word = scores_from_hidden(hidden, lm.get_output_embeddings(), input_ids, word_starts, slab=slab)
    return token_logp, word, hidden


__all__ = ["Distillation", "LaptObjective", "ObjectiveOutput", "TERMS", "objective_terms"]
