"""Training tokenizers of every kind: loadable offline, deterministic, round-tripping, carrying a source's specials."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer

from vocadapt.components.tokenizers.train import (
    KINDS, TokenizerTrainingSpec, train_tokenizer, train_tokenizer_from_dataset)

TEXTS = st.text(st.sampled_from(list("abcdeilmnoprstuzàèéìòù AEIOUÈ.,;:'’«»-0123456789\n\t😀中")), max_size=40)
FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.parametrize("kind", KINDS)
def test_trained_tokenizer_loads_offline(trained, kind):
    tokenizer = AutoTokenizer.from_pretrained(trained[kind].name_or_path)
    assert 300 < len(tokenizer) <= 600
    assert tokenizer.tokenize("la casa") == trained[kind].tokenize("la casa")


@FAST
@given(text=TEXTS)
def test_round_trip(trained, text):
    """Byte-level and sentencepiece (no dummy prefix, identity normalisation) reproduce any text exactly."""
    for kind in ("bytelevel-bpe", "spm-bpe", "spm-unigram"):
        tokenizer = trained[kind]
        assert tokenizer.decode(tokenizer(text, add_special_tokens=False)["input_ids"]) == text


@pytest.mark.parametrize("kind", ["bytelevel-bpe", "spm-bpe", "spm-unigram", "wordpiece"])
def test_training_is_deterministic(italian_train, tmp_path, kind):
    first = train_tokenizer([italian_train], TokenizerTrainingSpec(kind, 400, max_lines=150),
                            tmp_path / "a", show_progress=False)
    second = train_tokenizer([italian_train], TokenizerTrainingSpec(kind, 400, max_lines=150),
                             tmp_path / "b", show_progress=False)
    assert first.get_vocab() == second.get_vocab()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_from_dataset_equals_from_file(italian_train, tmp_path):
    from datasets import Dataset

    lines = [line for line in italian_train.read_text(encoding="utf-8").splitlines() if line.strip()]
    spec = TokenizerTrainingSpec("spm-bpe", 400)
    from_file = train_tokenizer([italian_train], spec, tmp_path / "file", show_progress=False)
    from_dataset = train_tokenizer_from_dataset(Dataset.from_dict({"text": lines}), spec, tmp_path / "dataset",
                                                show_progress=False)
    assert from_file.get_vocab() == from_dataset.get_vocab()


@pytest.mark.parametrize("kind", ["spm-bpe", "bytelevel-bpe"])
def test_like_carries_specials_template_and_bos(smollm2_tokenizer, italian_train, tmp_path, kind):
    tokenizer = train_tokenizer([italian_train], TokenizerTrainingSpec(kind, 500, like=smollm2_tokenizer),
                                tmp_path / kind, show_progress=False)  # fmt: skip
    source_added = smollm2_tokenizer.backend_tokenizer.get_added_tokens_decoder()
    for token_id, token in source_added.items():
        assert tokenizer.convert_ids_to_tokens(token_id) == token.content  # same specials at the same ids
    assert tokenizer.special_tokens_map == smollm2_tokenizer.special_tokens_map
    assert tokenizer.chat_template == smollm2_tokenizer.chat_template
    assert tokenizer("ciao")["input_ids"][:1] != [tokenizer.bos_token_id]  # SmolLM2 adds no bos either
    messages = [{"role": "user", "content": "ciao"}]
    assert tokenizer.apply_chat_template(messages, tokenize=False) == smollm2_tokenizer.apply_chat_template(
        messages, tokenize=False
    )


def test_bad_input_leaves_nothing(italian_train, tmp_path):
    with pytest.raises(ValueError, match="unknown tokenizer kind"):
        train_tokenizer([italian_train], TokenizerTrainingSpec("bpe", 400), tmp_path / "x", show_progress=False)
    with pytest.raises(FileNotFoundError, match="corpus file"):
        train_tokenizer([tmp_path / "missing.txt"], TokenizerTrainingSpec("spm-bpe", 400),
                        tmp_path / "x", show_progress=False)
    with pytest.raises(ValueError, match="too small"):
        train_tokenizer([italian_train], TokenizerTrainingSpec("spm-bpe", 200), tmp_path / "x", show_progress=False)
    assert not (tmp_path / "x").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not empty"):
        train_tokenizer([italian_train], TokenizerTrainingSpec("spm-bpe", 400), tmp_path / "full", show_progress=False)
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["keep.txt"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging folder left


def test_like_gemma_keeps_special_ids(gemma3_tokenizer, italian_train, tmp_path):
    """Gemma numbers pad, eos, bos, unk 0..3: a sentencepiece tokenizer trained like it keeps those ids."""
    tokenizer = train_tokenizer([italian_train], TokenizerTrainingSpec("spm-bpe", 7000, like=gemma3_tokenizer),
                                tmp_path / "g", show_progress=False)  # fmt: skip
    for role in ("pad", "eos", "bos", "unk"):
        assert getattr(tokenizer, f"{role}_token_id") == getattr(gemma3_tokenizer, f"{role}_token_id")
    assert tokenizer("ciao")["input_ids"][0] == tokenizer.bos_token_id  # Gemma inserts bos, so does the copy
