"""The language matrix expands the source vocabulary keeping English as it was: its held-out lines and, as `vocadapt
adapt` does, an English word list in every casing."""

from __future__ import annotations

import pytest
from rich.console import Console

from tests.pipelines.tiny_world import build_source_model
from vocadapt.components.tokenizers.language_settings import tokenizer_settings_for
from vocadapt.pipelines.languages import (
    EnglishLexicon,
    LanguageCorpus,
    MatrixContext,
    MatrixSettings,
    _target_tokenizers,
    english_lexicon,
    read_pairs,
    with_guard,
)
from vocadapt.components.errors import UserError

# English words (of the tiny source tokenizer's training text) that Italian tokens split differently when only
# the held-out lines are protected
WORDS = ("Because", "Before", "Behold", "Babylon", "Business")


@pytest.fixture(scope="module")
def source_tokenizer(tmp_path_factory, fixture_corpora):
    from transformers import AutoTokenizer

    folder = build_source_model(tmp_path_factory.mktemp("source"), [fixture_corpora["en.train"]])
    return AutoTokenizer.from_pretrained(str(folder))


def _expand(source_tokenizer, fixture_corpora, folder, lexicon: EnglishLexicon):
    corpus = LanguageCorpus("it", (fixture_corpora["it.train"],), read_pairs(fixture_corpora["it-en.validation"], "it"))
    settings = MatrixSettings(vocab_size=1000, tokenizer_training_lines=None, expansion_k=200,
                              expansion_ranking_lines=300, protect_lines=20)  # fmt: skip
    english = [reference for _, reference in corpus.pairs]
    context = MatrixContext(None, source_tokenizer, settings, folder, Console(quiet=True), lexicon)
    _, expansion = _target_tokenizers(corpus, context, tokenizer_settings_for("it"), english)
    return expansion


def _changed(source_tokenizer, expanded_tokenizer, words) -> list[str]:
    texts = [prefix + casing for word in words for casing in (word, word.lower(), word.upper())
             for prefix in ("", " ")]  # fmt: skip
    return [text for text in texts if expanded_tokenizer.tokenize(text) != source_tokenizer.tokenize(text)]


def test_matrix_expansion_keeps_the_word_list_as_the_source_tokenizes_it(source_tokenizer, fixture_corpora,
                                                                        tmp_path):
    word_list = tmp_path / "words.txt"
    word_list.write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    lexicon = english_lexicon(str(word_list))
    assert lexicon == EnglishLexicon(WORDS, "words.txt")

    lines_only = _expand(source_tokenizer, fixture_corpora, tmp_path / "lines", EnglishLexicon())
    assert _changed(source_tokenizer, lines_only.tokenizer, WORDS)  # the lines alone let Italian merges split them
    protected = _expand(source_tokenizer, fixture_corpora, tmp_path / "word-list", lexicon)
    assert len(protected.new_token_ids) > 0
    assert _changed(source_tokenizer, protected.tokenizer, WORDS) == []
    # the matrix builds the word list's guard once and adds each language's lines to it: the same expansion
    guarded = _expand(source_tokenizer, fixture_corpora, tmp_path / "guard", with_guard(lexicon, source_tokenizer))
    assert guarded.tokenizer.get_vocab() == protected.tokenizer.get_vocab()
    assert guarded.skipped == protected.skipped


def test_matrix_word_list_missing_file_and_none(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        english_lexicon(str(tmp_path / "missing.txt"))
    assert english_lexicon(None) == EnglishLexicon()
