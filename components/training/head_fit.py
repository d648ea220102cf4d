"""Fit the new tokens' LM-head rows on the frozen model's own hidden states (LAPT strategy ``new-head``).

After an expansion the new tokens exist but the model never writes them: a new row set from its pieces' rows (FVT,
Align, ...) gives a logit near the mean of theirs, below the first piece's, so greedy decoding keeps spelling words
piece by piece and the shorter vocabulary saves nothing when generating (``recovery`` benchmark: %Gen 0 after full
LAPT at 15K tokens). Here only the new rows of the output embedding learn, with the next-token loss over the whole
vocabulary, on the expanded model's own hidden states:

1. the body runs forward once, without gradients, over packed training sequences tokenized with the expanded
   tokenizer; the last hidden state of every position is kept (positions x hidden);
2. the old rows are frozen, so each position's log-sum-exp over them and the logit of an old target are computed
   once;
3. the new rows (N x hidden) are fitted by Adam over several passes of those positions: per pass, only an
   ``positions x N`` product, not a forward pass of the body;
4. a tenth of the sequences (``validation_fraction``) is held out of the fit: their loss is checked a few times a
   pass, and the rows kept are the ones with the lowest held-out loss, the initial rows included. The fit's own loss
   always falls, and alone it says nothing: on one H200 an untied fit at 1e-2 (3 passes over 1M tokens, after 21M
   tokens of distillation) lowered it from 5.00 to 4.84 nats while held-out Italian rose from 2.96 to 3.07 bits per
   byte and out-of-domain Italian from 2.68 to 2.97 (BENCHMARKS.md, "The GPU proof"). With the held-out check the
   fit never returns rows that do worse than the ones it was given, on text like the text it fitted.

The body and every source row stay exactly as they were, so the source language is untouched wherever its
tokenization is (what the expansion guard ensures). With tied embeddings the fitted rows are also the new tokens'
input rows (the hidden states were computed with the rows before the fit); ``untie=True`` gives the head its own
copy first, so the input rows keep their initialisation, at the cost of vocabulary x hidden more parameters (no more
FLOPs per token). On SmolLM2-135M expanded by 5,000 Italian tokens, the same fit tied and untied gave the same
held-out Italian bits per byte (3.91 and 3.91) and the tied model generated more of its new tokens (59% against
19%), so tied is the default (BENCHMARKS.md, "Recovery"). After a long LAPT the tied fit does more harm than the
untied one: on one H200 (1M tokens at 1e-2, 3 passes), chrF en->it fell to 10.1 tied (12.6M tokens of
distillation before it) and to 12.95 untied (21M tokens before it), from 13.8 for the source.

Pure computation; on several ranks (``torch.distributed`` initialised) each rank fits on its own positions and the
new rows' gradient is averaged, so every rank ends with the same rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class HeadFitResult:
    rows: int  # new rows fitted
    positions: int  # training positions (all ranks)
    new_targets: int  # positions whose next token is a new one (all ranks)
    loss_before: float  # next-token loss over the fit positions (at most METRIC_POSITIONS of them), before the fit
    loss_after: float
    passes: int
    untied: bool  # the head was tied to the input embeddings and was untied (untie=True)
    validation_positions: int = 0  # positions held out of the fit (all ranks); 0: no held-out check
    validation_loss_before: float | None = None  # their next-token loss with the rows the fit was given
    validation_loss_after: float | None = None  # ... with the rows kept (never above validation_loss_before)
    kept_update: int = 0  # optimizer updates behind the rows kept; 0: the fit's rows did worse held out
    updates: int = 0  # optimizer updates taken

    def metrics(self) -> dict[str, float]:
        metrics = {"head_fit_loss_before": self.loss_before, "head_fit_loss_after": self.loss_after,
                   "head_fit_positions": float(self.positions), "head_fit_new_targets": float(self.new_targets),
                   "head_fit_rows": float(self.rows), "head_fit_updates": float(self.updates),
                   "head_fit_kept_update": float(self.kept_update)}
        if self.validation_loss_before is not None:
            metrics.update(head_fit_validation_positions=float(self.validation_positions),
                           head_fit_validation_loss_before=self.validation_loss_before,
                           head_fit_validation_loss_after=float(self.validation_loss_after))
        return metrics


def untie_output_embeddings(model: nn.Module) -> bool:
    """Give a tied model its own LM head, a copy of the input embeddings; True when it was tied."""
    head, embeddings = model.get_output_embeddings(), model.get_input_embeddings()
    if head.weight is not embeddings.weight:
        return False
    head.weight = nn.Parameter(embeddings.weight.detach().clone())
    model.config.tie_word_embeddings = False
    if hasattr(model.config, "get_text_config"):
        model.config.get_text_config().tie_word_embeddings = False
    return True


def new_token_ids_of(model: nn.Module) -> list[int]:
    """The ids an expansion added, from the surgery's record (``config.vocadapt_init``)."""
    record = getattr(model.config, "vocadapt_init", None) or {}
    ranges = record.get("new_id_ranges")
    if record.get("mode") != "expand" or ranges is None:
        raise ValueError("strategy 'new-head' fits the rows an expansion added, and this model has no record of "
                         "an expansion (config.vocadapt_init with mode 'expand' and new_id_ranges); adapt it with "
                         "init.mode expand, or use strategy 'embeddings' or 'full'")
    return [token_id for start, end in ranges for token_id in range(start, end)]


FORWARD_TOKENS = 4096  # micro-batches are stacked up to this many tokens per forward pass of the body
METRIC_POSITIONS = 65536  # loss_before / loss_after: over at most this many evenly spaced fit positions (per rank)
# progress(phase, done, total): the body's forwards over the fit's tokens ("hidden states"), the frozen rows'
# log-sum-exp and target logits at every position ("old rows' logits"), then Adam's updates ("updates")
HeadFitProgress = Callable[[str, int, int], None]


def _stacked(batches: Iterable[tuple[torch.Tensor, torch.Tensor]]) -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
    """Consecutive batches of the same sequence length stacked into forwards of about FORWARD_TOKENS tokens: the
    loop's micro-batches (4 x 64 on the demo) are too small for the matrix products to run at speed on a CPU, and
    each sequence's hidden states do not depend on the others in its forward."""
    pending: list[tuple[torch.Tensor, torch.Tensor]] = []
    for input_ids, attention_mask in batches:
        if pending and (pending[0][0].shape[1] != input_ids.shape[1]
                        or sum(ids.numel() for ids, _ in pending) + input_ids.numel() > FORWARD_TOKENS):
            yield torch.cat([ids for ids, _ in pending]), torch.cat([mask for _, mask in pending])
            pending = []
        pending.append((input_ids, attention_mask))
    if pending:
        yield torch.cat([ids for ids, _ in pending]), torch.cat([mask for _, mask in pending])


@torch.no_grad()
def _hidden_states(model: nn.Module, batches: Iterable[tuple[torch.Tensor, torch.Tensor]], bf16: bool = False,
                   progress: HeadFitProgress | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(positions x hidden) float32 last hidden states, (positions,) next-token ids and (positions,) the index of the
    sequence each position comes from, real positions only. ``bf16``: the forward runs under bf16 autocast."""
    body = model.base_model
    states, targets, sequences = [], [], []
    sequence_count = 0
    device = next(model.parameters()).device
    forwards = list(_stacked(batches))
    for done, (input_ids, attention_mask) in enumerate(forwards):
        if progress:
            progress("hidden states", done, len(forwards))
        input_ids, attention_mask = input_ids.to(device), attention_mask.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            hidden = body(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
        keep = (attention_mask[:, :-1] * attention_mask[:, 1:]).bool()
        states.append(hidden[:, :-1][keep].float())
        targets.append(input_ids[:, 1:][keep])
        rows = torch.arange(sequence_count, sequence_count + len(input_ids), device=device)
        sequences.append(rows[:, None].expand_as(keep)[keep])
        sequence_count += len(input_ids)
    if progress:
        progress("hidden states", len(forwards), len(forwards))
    return torch.cat(states), torch.cat(targets), torch.cat(sequences)


# On a CPU the old rows' log-sum-exp is taken this many positions at a time: the logits of 128 positions x the
# demo's 44,152 old rows (23 MB in float32) are still in the cache when the log-sum-exp reads them, where those of
# 4,096 positions (723 MB) went to memory and back several times. At the demo's shape on the 2-core AMD EPYC: 1.29 s
# -> 0.90 s per 4,096 positions (benchmarks/head_fit_speed.py). A GPU takes the whole chunk at once.
CPU_LOG_SUM_EXP_POSITIONS = 128
# On a CPU each update's loss and gradient are computed this many positions at a time and the gradients summed, for
# the same reason: 0.34 s -> 0.22 s an update of 4,096 positions x the demo's 5,000 new rows. The sum is taken in
# another order than one product over all the positions, so the rows differ from a whole-update fit by rounding.
CPU_UPDATE_POSITIONS = 256


@torch.no_grad()
def old_rows_log_sum_exp(hidden: torch.Tensor, product_rows: torch.Tensor,
                         old_bias: torch.Tensor | None) -> torch.Tensor:
    """(positions,) float32 log-sum-exp of each position's logits over the old rows, plus ``old_bias``.
    ``product_rows``: the old rows (rows x hidden) in the products' dtype, float32 or bf16 (then the hidden states
    are cast too and the product comes out in bf16, what autocast does); the logits are float32. Each position's
    logits and reduction are its own, so the positions taken at once change the result at most by the matrix
    library's blocking of a product with fewer rows (none at the demo's shape on the 2-core AMD EPYC: the same bytes
    as before)."""
    at_once = CPU_LOG_SUM_EXP_POSITIONS if hidden.device.type == "cpu" else max(1, len(hidden))
    result = torch.empty(len(hidden), dtype=torch.float32, device=hidden.device)
    for start in range(0, len(hidden), at_once):
        logits = (hidden[start:start + at_once].to(product_rows.dtype) @ product_rows.T).float()
        if old_bias is not None:
            logits += old_bias
        result[start:start + at_once] = torch.logsumexp(logits, dim=-1)
    return result


@dataclass(frozen=True)
class HeadFitSettings:
    """How the new rows are fitted: ``passes`` over the positions with Adam at ``learning_rate``,
    ``positions_per_update`` positions an update, seeded with ``seed``; ``untie`` gives a tied model a head of its
    own first; ``validation_fraction`` and ``checks_per_pass`` are the held-out check, ``bf16`` the autocast of the
    matrix products (see :func:`fit_new_output_rows`)."""

    passes: int = 12
    learning_rate: float = 1e-2
    positions_per_update: int = 4096
    seed: int = 0
    untie: bool = False
    validation_fraction: float = 0.1
    checks_per_pass: int = 4
    bf16: bool = False


def fit_new_output_rows(model: nn.Module, batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
                        new_token_ids: Sequence[int], settings: HeadFitSettings = HeadFitSettings(), *,
                        progress: HeadFitProgress | None = None) -> HeadFitResult:
    """Fit the LM-head rows of ``new_token_ids`` to the next-token targets of ``batches`` ((input_ids,
    attention_mask) pairs tokenized with the model's expanded tokenizer), as ``settings`` say; every other
    parameter is left as it was. ``validation_fraction`` of the sequences (at least one, when there are two or more) is held out, its loss checked
    ``checks_per_pass`` times a pass, and the rows with the lowest held-out loss are kept (0: no held-out check, the
    last rows are kept). ``bf16``: the matrix products (the body's forward, the old rows' logits, the new rows'
    logits and their gradients) run under bf16 autocast; hidden states, log-sum-exps, losses, the rows and Adam stay
    float32. ``progress(phase, done, total)``, when given, is told how far the forwards and the updates are. See the
    module docstring. Deterministic for a given seed, batches and device."""
    passes, learning_rate, seed, untie = settings.passes, settings.learning_rate, settings.seed, settings.untie
    positions_per_update, bf16 = settings.positions_per_update, settings.bf16
    validation_fraction, checks_per_pass = settings.validation_fraction, settings.checks_per_pass
    if passes < 1:
        raise ValueError(f"passes must be at least 1, got {passes}")
    if not 0 <= validation_fraction < 1:
        raise ValueError(f"validation_fraction must be in [0, 1), got {validation_fraction}")
    if checks_per_pass < 1:
        raise ValueError(f"checks_per_pass must be at least 1, got {checks_per_pass}")
    new_ids = torch.as_tensor(sorted(set(new_token_ids)), dtype=torch.long)
    if not len(new_ids):
        raise ValueError("no new token ids to fit")
    if model.get_output_embeddings() is None:
        raise ValueError("the model has no LM head whose new rows could be fitted")
    untied = untie_output_embeddings(model) if untie else False
    head = model.get_output_embeddings()
    weight = head.weight
    if int(new_ids.max()) >= weight.shape[0]:
        raise ValueError(f"new token id {int(new_ids.max())} is past the head's {weight.shape[0]} rows")
    was_training = model.training
    model.eval()
    hidden, targets, sequences = _hidden_states(model, batches, bf16, progress)
    device = hidden.device

    def products():  # the matrix products in bf16 when asked; everything they feed is float32
        return torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16)

    generator = torch.Generator().manual_seed(seed)
    fit_positions, held_out = _split_by_sequence(sequences, validation_fraction, generator)
    new_ids = new_ids.to(device)
    is_new = torch.zeros(weight.shape[0], dtype=torch.bool, device=device)
    is_new[new_ids] = True
    old_ids = (~is_new).nonzero().squeeze(1)
    column = torch.full((weight.shape[0],), -1, dtype=torch.long, device=device)
    column[new_ids] = torch.arange(len(new_ids), device=device)
    bias = head.bias.detach().float() if getattr(head, "bias", None) is not None else None
    with torch.no_grad():
        # the old rows in the products' dtype, cast once for every chunk's product
        old_product_rows = weight.detach()[old_ids].to(torch.bfloat16 if bf16 else torch.float32)
        old_bias = bias[old_ids] if bias is not None else None
        old_lse, target_logit = [], []
        chunks = range(0, len(hidden), positions_per_update)
        for done, start in enumerate(chunks):
            if progress:  # the demo's 327,680 positions x 44,152 old rows: minutes on a CPU without AMX
                progress("old rows' logits", done, len(chunks))
            old_lse.append(old_rows_log_sum_exp(hidden[start:start + positions_per_update], old_product_rows,
                                                old_bias))
            chunk_targets = targets[start:start + positions_per_update]
            row = weight.detach()[chunk_targets].float()
            target_logit.append((hidden[start:start + positions_per_update] * row).sum(-1)
                                + (bias[chunk_targets] if bias is not None else 0))
        old_lse, old_target_logit = torch.cat(old_lse), torch.cat(target_logit)
        if progress:
            progress("old rows' logits", len(chunks), len(chunks))
    target_column = column[targets]
    target_is_new = target_column >= 0
    new_bias = bias[new_ids] if bias is not None else None
    rows = weight.detach()[new_ids].float().clone().requires_grad_(True)
    optimizer = torch.optim.Adam([rows], lr=learning_rate)
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()

    def loss_of(index: torch.Tensor) -> torch.Tensor:
        with products():
            logits = (hidden[index] @ rows.T).float()
        if new_bias is not None:
            logits = logits + new_bias
        total = torch.logaddexp(old_lse[index], torch.logsumexp(logits, dim=-1))
        picked = logits.gather(1, target_column[index].clamp(min=0)[:, None]).squeeze(1)
        return (total - torch.where(target_is_new[index], picked, old_target_logit[index])).sum()

    def mean_loss(positions: torch.Tensor) -> float:
        """The mean loss over ``positions`` (all ranks' positions when distributed)."""
        with torch.no_grad():
            total = sum(float(loss_of(positions[s:s + positions_per_update]))
                        for s in range(0, len(positions), positions_per_update))
        counts = torch.tensor([total, float(len(positions))], dtype=torch.float64, device=device)
        if distributed:
            torch.distributed.all_reduce(counts)
        return float(counts[0] / counts[1]) if counts[1] else float("nan")

    checked = _on_any_rank(len(held_out) > 0, distributed, device)
    # the fit's own loss is a reported figure, not a decision: a sample of its positions says it (the demo's 327,680
    # positions would cost two more passes); the held-out check, which decides, reads all of its positions
    metric_positions = fit_positions
    if len(fit_positions) > METRIC_POSITIONS:
        metric_positions = fit_positions[torch.linspace(0, len(fit_positions) - 1, METRIC_POSITIONS).long().to(device)]
    loss_before = mean_loss(metric_positions)
    best_loss = validation_loss_before = mean_loss(held_out) if checked else None
    best_rows, kept_update, taken = None, 0, 0
    updates = -(-len(fit_positions) // positions_per_update)
    if distributed:  # every rank takes the same number of optimizer steps
        count = torch.tensor([updates], dtype=torch.long, device=device)
        torch.distributed.all_reduce(count, op=torch.distributed.ReduceOp.MIN)
        updates = int(count)
    check_every = max(1, updates // checks_per_pass)
    update_positions_at_once = CPU_UPDATE_POSITIONS if device.type == "cpu" else max(1, positions_per_update)
    for _ in range(passes):
        order = fit_positions[torch.randperm(len(fit_positions), generator=generator).to(device)]
        for update in range(updates):
            index = order[update * positions_per_update:(update + 1) * positions_per_update]
            optimizer.zero_grad()
            for start in range(0, len(index), update_positions_at_once):  # the gradient summed block by block
                (loss_of(index[start:start + update_positions_at_once]) / max(1, len(index))).backward()
            if distributed:
                torch.distributed.all_reduce(rows.grad)
                rows.grad /= torch.distributed.get_world_size()
            optimizer.step()
            taken += 1
            if progress:
                progress("updates", taken, passes * updates)
            if checked and ((update + 1) % check_every == 0 or update + 1 == updates):
                loss = mean_loss(held_out)  # the same on every rank: the same rows are kept everywhere
                if loss < best_loss:
                    best_loss, best_rows, kept_update = loss, rows.detach().clone(), taken
    if not checked:
        best_rows, kept_update = rows.detach(), taken
    with torch.no_grad():
        if best_rows is not None:  # None: every checked set of rows did worse held out than the initial ones
            weight[new_ids] = best_rows.to(weight.dtype)
        rows.data = weight.detach()[new_ids].float()
    loss_after = mean_loss(metric_positions)
    counts = torch.tensor([float(len(hidden)), float(target_is_new.sum()), float(len(held_out))],
                          dtype=torch.float64, device=device)
    if distributed:
        torch.distributed.all_reduce(counts)
    model.train(was_training)
    return HeadFitResult(rows=len(new_ids), positions=int(counts[0]), new_targets=int(counts[1]),
                         loss_before=loss_before, loss_after=loss_after, passes=passes, untied=untied,
                         validation_positions=int(counts[2]), validation_loss_before=validation_loss_before,
                         validation_loss_after=best_loss, kept_update=kept_update, updates=taken)


def _split_by_sequence(sequences: torch.Tensor, fraction: float, generator: torch.Generator,
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """(fit positions, held-out positions): ``fraction`` of the sequences, at least one of two or more, whole
    sequences held out (neighbouring positions of one text would make the held-out check flatter the fit)."""
    device = sequences.device
    count = int(sequences.max()) + 1 if len(sequences) else 0
    held = min(count - 1, max(1, round(fraction * count))) if fraction > 0 and count >= 2 else 0
    chosen = torch.zeros(max(count, 1), dtype=torch.bool)
    if held:  # no draw otherwise: without a held-out check the fit's order is the one it always had
        chosen[torch.randperm(count, generator=generator)[:held]] = True
    is_held_out = chosen.to(device)[sequences] if len(sequences) else torch.zeros(0, dtype=torch.bool, device=device)
    return (~is_held_out).nonzero().squeeze(1), is_held_out.nonzero().squeeze(1)


def _on_any_rank(flag: bool, distributed: bool, device: torch.device) -> bool:
    """Whether ``flag`` holds on any rank (the held-out check runs on every rank or on none)."""
    if not distributed:
        return flag
    value = torch.tensor([int(flag)], device=device)
    torch.distributed.all_reduce(value, op=torch.distributed.ReduceOp.MAX)
    return bool(value)
