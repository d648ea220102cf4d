"""Trimming real family tokenizers to Italian and English: Gemma-3 (262,144 sentencepiece-style pieces with byte
fallback, 6,415 added tokens) and Llama-3.1 (byte-level, ``ignore_merges``).

Kept text (every line of the slices whose source tokens were all kept) gets the source's ids through the trimmed
ids' map; text in other scripts still encodes and decodes back; the specials and the chat template are the source's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vocadapt.components.tokenizers.trim import trim_tokenizer

CORPORA = Path(__file__).parents[1] / "fixtures" / "corpora"
OTHER_SCRIPTS = ["東京は日本の首都です。", "Москва — столица России.", "नमस्ते दुनिया", "Zwölf Boxkämpfer 😀 ∑ x²"]


def lines(name: str) -> list[str]:
    return (CORPORA / f"{name}.txt").read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("family", ["gemma3", "llama3_1"])
def test_trimmed_family_tokenizer_keeps_kept_text_and_specials(family, load_family_tokenizer):
    source = load_family_tokenizer(family)
    trim = trim_tokenizer(source, lines("it.train") + lines("en.train"), min_count=2)
    trimmed, target_to_source = trim.tokenizer, trim.target_to_source
    kept = set(target_to_source.values())
    assert len(trimmed) == len(target_to_source) < len(source) // 10
    checked, kept_lines = 0, []
    for text in lines("it.validation") + lines("en.validation") + lines("it.train") + lines("en.train"):
        source_ids = source(text, add_special_tokens=False).input_ids
        trimmed_ids = trimmed(text, add_special_tokens=False).input_ids
        assert trimmed.decode(trimmed_ids) == source.decode(source_ids), text
        if set(source_ids) <= kept:
            assert [target_to_source[i] for i in trimmed_ids] == source_ids, text
            checked += 1
            kept_lines.append(text)
    assert checked >= 100, checked
    for text in OTHER_SCRIPTS:
        source_ids = source(text, add_special_tokens=False).input_ids
        trimmed_ids = trimmed(text, add_special_tokens=False).input_ids
        assert not set(source_ids) <= kept
        assert trimmed.decode(trimmed_ids) == source.decode(source_ids) == text
    for role in ("bos", "eos", "pad", "unk"):
        token = getattr(source, f"{role}_token")
        assert getattr(trimmed, f"{role}_token") == token
        if token is not None:
            assert target_to_source[getattr(trimmed, f"{role}_token_id")] == getattr(source, f"{role}_token_id")
    # the template's own text (role names, turn markers) is kept whatever the corpus; the contents are kept lines
    messages = [{"role": "user", "content": kept_lines[0]}, {"role": "assistant", "content": kept_lines[1]}]
    rendered = source.apply_chat_template(messages, tokenize=False)
    assert trimmed.apply_chat_template(messages, tokenize=False) == rendered
    source_ids = source(rendered, add_special_tokens=False).input_ids
    assert [target_to_source[i] for i in trimmed(rendered, add_special_tokens=False).input_ids] == source_ids
    # line breaks and runs of spaces are kept though the slices (one paragraph per line) never show them. Llama-3.1
    # also has tokens of punctuation and line breaks (".\n\n"), which only a corpus that shows them keeps: without
    # them the text is written "." then "\n\n", so only Gemma-3 keeps the source's ids here
    paragraphs = f"{kept_lines[0]}\n\n{kept_lines[1]}\n    {kept_lines[2]}\t."
    source_ids = source(paragraphs, add_special_tokens=False).input_ids
    trimmed_ids = trimmed(paragraphs, add_special_tokens=False).input_ids
    assert trimmed.decode(trimmed_ids) == source.decode(source_ids) == paragraphs
    if family == "gemma3":
        assert [target_to_source[i] for i in trimmed_ids] == source_ids
    for token in ("\n", "\n\n") if family == "gemma3" else ("Ċ", "ĊĊ", "ĠĠĠ"):
        assert source.convert_tokens_to_ids(token) in kept and source.convert_tokens_to_ids(token) not in trim.counts
