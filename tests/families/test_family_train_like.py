"""A byte-level target trained ``like`` a family splits text as the family does: its number rule holds."""

from __future__ import annotations

import re

import pytest

from vocadapt.components.tokenizers.canonical import canonical_tokens
from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, train_tokenizer_from_iterator

# Text full of numbers: without the family's pre-tokenizer, BPE learns '2024', ' 12345', '1999.' as tokens.
NUMBERS = [f"Nel {1900 + i % 125} ho pagato {10000 + 37 * i} euro, il {i % 28 + 1} marzo, pagina {i * 7}."
           for i in range(3000)]


@pytest.mark.parametrize(("family", "longest_digit_run"), [("llama3_1", 3), ("deepseek_v3", 3), ("qwen3", 1)])
def test_numbers_follow_the_family_rule(family, longest_digit_run, load_family_tokenizer, tmp_path):
    like = load_family_tokenizer(family)
    target = train_tokenizer_from_iterator(NUMBERS, TokenizerTrainingSpec("bytelevel-bpe", 2000, like=like),
                                           tmp_path / family, show_progress=False)
    texts = [form.text_bytes.decode("utf-8", errors="replace") for form in canonical_tokens(target)
             if form is not None and not form.special]
    runs = [len(run) for text in texts for run in re.findall(r"\d+", text)]
    assert max(runs) == longest_digit_run, "the corpus teaches the longest run the family allows, and no longer"
    assert not [text for text in texts if re.search(r"\s\d", text)], "no token joins a space and a digit"
    sample = "Nel 2024 ho pagato 12345 euro."
    source_digits = [piece for piece in like.tokenize(sample) if piece.strip("Ġ").isdigit()]
    target_digits = [piece for piece in target.tokenize(sample) if piece.strip("Ġ").isdigit()]
    assert target_digits == source_digits
