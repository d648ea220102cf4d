"""Fertility figures against a per-document loop, and vocabulary replacement (special tokens, chat template, config)."""

from __future__ import annotations

import pytest
from transformers import LlamaConfig

from vocadapt.components.tokenizers.fertility import ParallelText, fertility_report
from vocadapt.components.tokenizers.replace import replace_vocabulary, updated_model_config


def _loop_tokens(tokenizer, documents) -> int:
    return sum(len(tokenizer(document, add_special_tokens=False)["input_ids"]) for document in documents)


def test_fertility_matches_a_plain_loop(trained, italian_lines, english_lines):
    tokenizer = trained["spm-bpe"]
    documents, references = italian_lines[:60], english_lines[:60]
    report = fertility_report(tokenizer, documents, reference=ParallelText(references), batch_size=7)
    tokens = _loop_tokens(tokenizer, documents)
    assert report.tokens == tokens
    assert report.words == sum(len(d.split()) for d in documents)
    assert report.bytes == sum(len(d.encode()) for d in documents)
    assert report.tokens_per_word == pytest.approx(tokens / report.words)
    assert report.tokens_per_character == pytest.approx(tokens / sum(len(d) for d in documents))
    assert report.tokens_per_document == pytest.approx(tokens / 60)
    assert report.parity == pytest.approx(tokens / _loop_tokens(tokenizer, references))
    assert report.as_dict()["tokens"] == tokens


def test_fertility_shares(trained):
    spm = trained["spm-bpe"]
    assert fertility_report(spm, ["😀😀"]).byte_fallback_rate == 1.0  # 8 <0xNN> pieces
    assert fertility_report(spm, ["la casa"]).byte_fallback_rate == 0.0
    wordpiece = trained["wordpiece"]
    assert fertility_report(wordpiece, ["😀 la"]).unknown_rate == pytest.approx(0.5)
    everything = fertility_report(spm, ["la casa è bella"], new_token_ids=range(len(spm)))
    nothing = fertility_report(spm, ["la casa è bella"], new_token_ids=[])
    assert (everything.new_token_share, nothing.new_token_share) == (1.0, 0.0)


def test_fertility_ignores_padding_and_restores_it(trained):
    tokenizer = trained["bytelevel-bpe"]
    expected = _loop_tokens(tokenizer, ["la casa"])
    backend = tokenizer.backend_tokenizer
    backend.enable_padding(pad_id=1, pad_token="<pad>", length=64)
    try:
        assert fertility_report(tokenizer, ["la casa"]).tokens == expected < 64
        assert backend.padding is not None and backend.padding["length"] == 64
    finally:
        backend.no_padding()


def test_fertility_bad_input(trained):
    with pytest.raises(ValueError, match="no documents"):
        fertility_report(trained["spm-bpe"], [])
    with pytest.raises(ValueError, match="parallel text"):
        fertility_report(trained["spm-bpe"], ["a", "b"], reference=ParallelText(["a"]))


def test_italian_tokenizer_is_cheaper_on_italian_than_english(trained, italian_lines, english_lines):
    tokenizer = trained["spm-unigram"]
    italian = fertility_report(tokenizer, italian_lines)
    english = fertility_report(tokenizer, english_lines)
    assert italian.tokens_per_byte < english.tokens_per_byte


def test_replacement_carries_source_specials_and_template(smollm2_tokenizer, trained):
    target = trained["spm-bpe"]  # trained with its own <unk> <s> </s> <pad>
    replacement = replace_vocabulary(smollm2_tokenizer, target)
    adapted = replacement.tokenizer
    assert (target.bos_token, len(target)) == ("<s>", 600)  # the target itself is not changed
    for role in ("bos", "eos", "pad", "unk"):
        assert getattr(adapted, f"{role}_token") == getattr(smollm2_tokenizer, f"{role}_token")
        adapted_id = getattr(adapted, f"{role}_token_id")
        assert replacement.target_to_source[adapted_id] == getattr(smollm2_tokenizer, f"{role}_token_id")
    messages = [{"role": "user", "content": "Ciao, come stai?"}]
    rendered = adapted.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered == smollm2_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ids = adapted(rendered, add_special_tokens=False)["input_ids"]
    assert ids.count(adapted.convert_tokens_to_ids("<|im_start|>")) == 3  # system, user, assistant
    assert adapted.decode(ids) == rendered
    assert set(replacement.new_token_ids).isdisjoint(replacement.target_to_source)
    assert set(replacement.new_token_ids) | set(replacement.target_to_source) == set(range(len(adapted)))


def test_replacement_of_a_like_trained_target_adds_nothing(smollm2_tokenizer, italian_train, tmp_path):
    from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, train_tokenizer

    target = train_tokenizer([italian_train], TokenizerTrainingSpec("bytelevel-bpe", 400, like=smollm2_tokenizer),
                             tmp_path / "t", show_progress=False)  # fmt: skip
    replacement = replace_vocabulary(smollm2_tokenizer, target)
    assert replacement.added_special_tokens == []
    assert len(replacement.tokenizer) == len(target) == 400
    assert replacement.special_token_ids == {"bos": 1, "eos": 2, "pad": 2, "unk": 0}


def _llama_config(vocab_size: int, **ids) -> LlamaConfig:
    return LlamaConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, **ids)  # fmt: skip


def test_updated_model_config_ids_and_padding(smollm2_tokenizer, trained):
    replacement = replace_vocabulary(smollm2_tokenizer, trained["spm-unigram"])
    adapted = replacement.tokenizer
    config = _llama_config(49152, bos_token_id=1, eos_token_id=2, pad_token_id=2)
    updated = updated_model_config(config, replacement)
    assert updated.vocab_size == len(adapted)  # the source was not padded
    assert (updated.bos_token_id, updated.eos_token_id, updated.pad_token_id) == (
        adapted.bos_token_id, adapted.eos_token_id, adapted.pad_token_id,
    )  # fmt: skip
    assert config.vocab_size == 49152  # not mutated
    padded = updated_model_config(_llama_config(49152 + 64, eos_token_id=[2, 0]), replacement)
    assert padded.vocab_size % 64 == 0 and 0 <= padded.vocab_size - len(adapted) < 64  # 49216 = 769 * 64
    assert padded.eos_token_id == [adapted.eos_token_id, adapted.unk_token_id]  # Llama-3.1-style eos list
    assert updated_model_config(config, replacement, pad_to_multiple_of=128).vocab_size % 128 == 0
