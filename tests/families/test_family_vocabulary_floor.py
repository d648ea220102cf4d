"""A target tokenizer trained like Gemma-3 carries its 6,415 added tokens: a vocabulary at or below that is refused
by adapt's preflight, before any run or folder exists, and by the trainer itself as a user error (exit 2)."""

from __future__ import annotations

import pytest

from vocadapt.components.errors import UserError
from pathlib import Path

from vocadapt.platform.config import load_config


@pytest.mark.parametrize(("vocab_size", "refused"), [(2000, True), (6415, True), (8192, False)])
def test_preflight_refuses_a_vocabulary_below_what_gemma3_carries(vocab_size, refused, load_family_tokenizer):
    from vocadapt.pipelines.preflight import check_target_vocab_size

    config = load_config(Path(__file__).parents[2] / "configs" / "italian-smollm2-expand.yaml",
                         [f"tokenizer.vocab_size={vocab_size}", "tokenizer.kind=bytelevel-bpe",
                          "tokenizer.expand_top_k=1000"])  # at most the target vocabulary (never capped)
    gemma3 = load_family_tokenizer("gemma3")
    if not refused:
        check_target_vocab_size(config, gemma3)
        return
    with pytest.raises(UserError, match=r"tokenizer.vocab_size: .* carries 6,415 tokens .* above 6,415"):
        check_target_vocab_size(config, gemma3)


def test_the_trainer_refuses_it_as_a_user_error(load_family_tokenizer, tmp_path):
    from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, train_tokenizer_from_iterator

    with pytest.raises(UserError, match="raise it above 6,671"):
        train_tokenizer_from_iterator(["ciao"] * 10,
                                      TokenizerTrainingSpec("spm-bpe", 4000, like=load_family_tokenizer("gemma3")),
                                      tmp_path / "out", show_progress=False)
    assert not (tmp_path / "out").exists()
