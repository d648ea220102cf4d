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
