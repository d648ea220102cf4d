"""Vocabulary surgery on a model in memory (small models): new input embeddings and LM head, config updated."""

from __future__ import annotations

from typing import Any

import torch

from vocadapt.components.initializers import configure_initializer
from vocadapt.components.surgery.matrices import InitInputs, Initialisation, adapt_matrix
from vocadapt.components.surgery.plan import RowLayout, VocabularyPlan, plan_vocabulary

SPECIAL_ID_FIELDS = ("bos_token_id", "eos_token_id", "pad_token_id")


def heads_are_tied(model: Any) -> bool:
    """True when the LM head shares its weight tensor with the input embeddings (or there is no head)."""
    head = model.get_output_embeddings()
    return head is None or head.weight is model.get_input_embeddings().weight


def target_special_ids(value: Any, field: str, source_tokenizer: Any, target_tokenizer: Any) -> Any:
    """What a config's ``field`` (bos/eos/pad) holds after surgery, given its source ``value``.

    A single id (or none) becomes the target tokenizer's own. A list (a generation config's several stop ids:
    Llama-3.1-Instruct stops at ``<|end_of_text|>``, ``<|eom_id|>`` and ``<|eot_id|>``) keeps each id whose token
    the target has, by token text, in its order, with the target tokenizer's own id first if the list lacked it;
    replacing the list by the one id would silently drop the other stops."""
    own = getattr(target_tokenizer, field, None)
    if not isinstance(value, (list, tuple)) or source_tokenizer is None:
        return own
    vocabulary = target_tokenizer.get_vocab()
    kept = []
    for source_id in value:
        token = source_tokenizer.convert_ids_to_tokens(int(source_id))
        if token in vocabulary and vocabulary[token] not in kept:
            kept.append(vocabulary[token])
    if own is not None and own not in kept:
        kept.insert(0, own)
    return kept or own


def update_token_ids(config: Any, target_tokenizer: Any, rows: int, source_tokenizer: Any = None) -> None:
    """vocab_size follows the rows; bos/eos/pad ids follow the target tokenizer (None where it has no such token;
    a list of ids is carried over token by token, :func:`target_special_ids`)."""
    config.vocab_size = rows
    for field in SPECIAL_ID_FIELDS:
        setattr(config, field, target_special_ids(getattr(config, field, None), field, source_tokenizer,
                                                  target_tokenizer))


def _new_bias(bias: torch.Tensor, plan: VocabularyPlan) -> torch.Tensor:
    """LM-head bias rows: shared copied, new ones the mean source bias, padding as for the weights."""
    out = torch.zeros(plan.rows, dtype=bias.dtype)
    if plan.mode == "expand":
        out[: min(plan.rows, len(bias))] = bias[: plan.rows]
    for target, source in plan.target_to_source.items():
        out[target] = bias[source]
    out[plan.new_target_ids] = bias.float().mean().to(bias.dtype)
    return out


def adapt_embeddings(
    model: Any,
    initialisation: Initialisation,
    *,
    source_tokenizer: Any,
    target_tokenizer: Any,
    layout: RowLayout = RowLayout(),
) -> Any:
    """Give ``model`` the target vocabulary: input embeddings and (if untied) LM head, each from its own matrix,
    the new rows set as ``initialisation`` says (its helper a ``TokenVectors`` or None).

    layout: replace or expand, the rows, and the overlap and ids to initialise when the caller knows them (computed
        from the tokenizers otherwise: canonical overlap for "replace"; identity on source ids for "expand").
    Shared rows are copied exactly, special tokens keep their source rows (matched by role), padding rows are kept
    in expansion, and ``config.vocab_size`` and the bos/eos/pad ids follow the target tokenizer.
    Returns the same model, modified in place; what was done is in ``model.config.vocadapt_init`` (a dict: method,
    mode, overlap counts, helper, seconds), which ``save_pretrained`` writes into config.json.
    """
    method = configure_initializer(initialisation.method, initialisation.options)
    seed, helper = initialisation.seed, initialisation.helper
    method.check_helper(helper)
    embeddings = model.get_input_embeddings()
    head = model.get_output_embeddings()
    tied = heads_are_tied(model)
    plan = plan_vocabulary(source_tokenizer, target_tokenizer, source_rows=embeddings.weight.shape[0], layout=layout)
    inputs = InitInputs(source_tokenizer, target_tokenizer, seed=seed, helper=helper,
                        corpus_files=initialisation.corpus_files)
    seconds = {}
    with torch.no_grad():
        new_input, seconds["input"] = adapt_matrix(embeddings.weight.detach(), plan, method, inputs, role="input")
        if not tied:
            new_output, seconds["output"] = adapt_matrix(head.weight.detach(), plan, method, inputs, role="output")
    pad_id = getattr(target_tokenizer, "pad_token_id", None)
    # _weight: the adapted matrix is the module's weight as is (no throwaway random init of a vocabulary-sized
    # matrix first: 1.4 s at Mistral-7B's 32,000 x 4,096 on a busy 2-core machine)
    replacement = torch.nn.Embedding(plan.rows, new_input.shape[1], padding_idx=pad_id, _weight=new_input)
    replacement.weight.requires_grad_(embeddings.weight.requires_grad)
    model.set_input_embeddings(replacement)
    if head is not None:
        if head.bias is not None:
            head.bias = torch.nn.Parameter(_new_bias(head.bias.detach(), plan))
        head.weight = replacement.weight if tied else torch.nn.Parameter(new_output)
        head.out_features = plan.rows
    update_token_ids(model.config, target_tokenizer, plan.rows, source_tokenizer)
    generation = getattr(model, "generation_config", None)
    if generation is not None:
        for field in SPECIAL_ID_FIELDS:
            setattr(generation, field, target_special_ids(getattr(generation, field, None), field, source_tokenizer,
                                                          target_tokenizer))
    model.config.vocadapt_init = {
        "method": method.name, "options": dict(method.options), "effective_options": method.effective_options(),
        "seed": seed, "tied": tied, **plan.record(),
        "helper": helper.record() if hasattr(helper, "record") else (None if helper is None else str(helper)),
        "seconds": {role: round(value, 3) for role, value in seconds.items()},
    }
    return model


def extra_heads_from_lm_head(model: Any, count: int = 1) -> torch.nn.ModuleList:
    """Multi-token prediction ("0.01GB" §5): ``count`` extra LM heads, each initialised as a copy of the LM head.

    Call it after :func:`adapt_embeddings`, so the copies carry the adapted head's rows (new tokens included). Each
    copy is a separate tensor on the head's device and dtype, never tied to the head or the input embeddings.
    """
    head = model.get_output_embeddings()
    if head is None:
        raise ValueError("the model has no LM head to copy the extra heads from")
    copies = []
    for _ in range(count):
        extra = torch.nn.Linear(head.in_features, head.out_features, bias=head.bias is not None,
                                dtype=head.weight.dtype, device=head.weight.device)
        with torch.no_grad():
            extra.weight.copy_(head.weight)
            if head.bias is not None:
                extra.bias.copy_(head.bias)
        copies.append(extra)
    return torch.nn.ModuleList(copies)
