"""The transformers generation backend: left padding does not change greedy output, generated ids exclude prompt
and padding (only real tokens count), generation stops at the end of the line; %Gen's new-vocabulary ids."""

from __future__ import annotations

import pytest

from vocadapt.platform.evaluation.generation import TransformersBackend
from vocadapt.components.tokenizers.overlap import new_token_ids
from vocadapt.platform.model_loading import load_model

PROMPTS = ["Traduci dall'Inglese all'Italiano\nText: Good morning, my friend.\nTranslation:", "E Dio disse:",
           "Text: ciao\nTranslation:"]


@pytest.fixture(scope="module")
def adapted(adapted_model_dir):
    return load_model(adapted_model_dir)


def test_batched_generation_equals_one_prompt_at_a_time(adapted):
    model, tokenizer = adapted
    batched = TransformersBackend(model, tokenizer, batch_size=3).generate(PROMPTS, max_new_tokens=6)
    single = TransformersBackend(model, tokenizer, batch_size=1).generate(PROMPTS, max_new_tokens=6)
    assert batched.token_ids == single.token_ids and batched.texts == single.texts
    for ids, text in zip(batched.token_ids, batched.texts):
        assert 0 < len(ids) <= 6
        assert "\n" not in text
        # a stop (newline or EOS) can only be the last generated token
        assert all("\n" not in tokenizer.decode([t]) and t != tokenizer.eos_token_id for t in ids[:-1])
    assert batched.seconds > 0


def test_new_token_ids_are_the_target_tokens_the_source_lacks(adapted, source_model_dir):
    _, tokenizer = adapted
    _, source_tokenizer = load_model(source_model_dir)
    new = new_token_ids(source_tokenizer, tokenizer)
    assert 0 < len(new) < len(tokenizer)
    # single bytes are in both byte-level vocabularies, so they are never "new"
    assert tokenizer.convert_tokens_to_ids("a") not in new
    assert new_token_ids(tokenizer, tokenizer) == set()


def test_generation_stops_a_row_at_the_token_that_ends_its_line(adapted):
    """The backend's stopping rule ends a row at the first token holding the newline, while the batch's other rows
    go on: in the raw output only padding follows it (a rule that never fires would leave real tokens there)."""
    import torch
    from transformers import LogitsProcessorList, StoppingCriteriaList

    from vocadapt.platform.evaluation.generation import _LineEnd, left_padded

    model, tokenizer = adapted
    newline = tokenizer.convert_tokens_to_ids(tokenizer.tokenize("a\n")[-1])
    assert "\n" in tokenizer.decode([newline])
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    encoded = left_padded(tokenizer, PROMPTS[1:], pad)
    width = encoded["input_ids"].shape[1]

    def newline_second_in_row_0(input_ids, scores):
        if input_ids.shape[1] == width + 1:  # the second generated token of the first row is the newline
            scores[0] = -torch.inf
            scores[0, newline] = 0.0
        scores[1:, newline] = -torch.inf  # the other row never ends its line
        if tokenizer.eos_token_id is not None:
            scores[:, tokenizer.eos_token_id] = torch.where(scores[:, tokenizer.eos_token_id] == 0.0, 0.0, -torch.inf)
        return scores

    output = model.generate(**encoded, max_new_tokens=6, do_sample=False, pad_token_id=pad,
                            logits_processor=LogitsProcessorList([newline_second_in_row_0]),
                            stopping_criteria=StoppingCriteriaList([_LineEnd(tokenizer)]))
    first, second = output[:, width:].tolist()
    assert first[1] == newline and set(first[2:]) <= {pad}, first
    assert len(second) == 6 and pad not in second, second
