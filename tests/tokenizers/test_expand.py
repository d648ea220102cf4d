"""Vocabulary expansion on real text: English unchanged, every added token reachable, exact round trips."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vocadapt.components.tokenizers.canonical import canonical_tokens
from vocadapt.components.tokenizers.expand import (
    SPLITS_REASON,
    delta_vocabulary,
    expand_vocabulary,
    expand_with_target,
    expand_with_top_k,
    lexicon_texts,
    protected_source_text,
    top_k_new_tokens,
    unreachable_tokens,
)
from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer
from vocadapt.components.tokenizers.fertility import fertility_report
from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, train_tokenizer

TEXTS = st.text(st.sampled_from(list("abcdefgilmnoprstuvzàèéìòù AEIOUÈ.,;:'’«»-0123\n😀")), max_size=60)
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _ids(tokenizer, texts):
    return tokenizer(list(texts), add_special_tokens=False)["input_ids"]


@pytest.fixture(scope="module")
def italian_bytelevel(tmp_path_factory, italian_train):
    """An auxiliary byte-level tokenizer trained on the Italian slice (the '0.01GB' recipe's T_aux)."""
    return train_tokenizer([italian_train], TokenizerTrainingSpec("bytelevel-bpe", 3000),
                           tmp_path_factory.mktemp("aux") / "t", show_progress=False)  # fmt: skip


@pytest.fixture(scope="module")
def italian_train_lines(italian_train):
    return italian_train.read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def smollm2_top_1000(smollm2_tokenizer, italian_bytelevel, italian_train_lines):
    return expand_with_top_k(smollm2_tokenizer, italian_bytelevel, italian_train_lines, 1000)


def test_top_k_adds_k_reachable_tokens(smollm2_tokenizer, smollm2_top_1000):
    expansion = smollm2_top_1000
    tokenizer = expansion.tokenizer
    assert len(expansion.new_token_ids) == 1000
    assert expansion.new_token_ids == list(range(len(smollm2_tokenizer), len(smollm2_tokenizer) + 1000))
    assert unreachable_tokens(tokenizer, expansion.new_token_ids) == []
    # In context: a word-start token after another word, e.g. "e" + " perché".
    forms = canonical_tokens(tokenizer)
    for token_id in expansion.new_token_ids:
        if forms[token_id].word_start:
            text = "e" + forms[token_id].text_bytes.decode()
            assert _ids(tokenizer, [text])[0][-1] == token_id
    assert tokenizer.chat_template == smollm2_tokenizer.chat_template
    assert tokenizer.special_tokens_map == smollm2_tokenizer.special_tokens_map


def test_english_changes_only_where_it_contains_a_new_token(smollm2_tokenizer, smollm2_top_1000, english_lines):
    """Without protection, only English lines containing a new token's own text (shared names) change."""
    tokenizer = smollm2_top_1000.tokenizer
    forms = canonical_tokens(tokenizer)
    new_texts = [forms[i].text_bytes.decode("utf-8", "replace") for i in smollm2_top_1000.new_token_ids]
    before, after = _ids(smollm2_tokenizer, english_lines), _ids(tokenizer, english_lines)
    changed = [line for line, old, new in zip(english_lines, before, after) if old != new]
    assert len(changed) < len(english_lines) // 4  # help texts share product names (Calc, .ods) with Italian
    assert all(any(text in line for text in new_texts) for line in changed)


def test_protected_english_is_identical(smollm2_tokenizer, italian_bytelevel, italian_train_lines, english_lines):
    expansion = expand_with_top_k(smollm2_tokenizer, italian_bytelevel, italian_train_lines, 1000,
                                  protect=english_lines)  # fmt: skip
    assert _ids(expansion.tokenizer, english_lines) == _ids(smollm2_tokenizer, english_lines)
    assert len(expansion.new_token_ids) == 1000
    assert unreachable_tokens(expansion.tokenizer, expansion.new_token_ids) == []


@FAST
@given(text=TEXTS)
def test_round_trip_after_expansion(smollm2_top_1000, text):
    tokenizer = smollm2_top_1000.tokenizer
    assert tokenizer.decode(_ids(tokenizer, [text])[0]) == text


def test_italian_fertility_falls_with_k(smollm2_tokenizer, italian_bytelevel, italian_train_lines, italian_lines):
    fertilities = [fertility_report(smollm2_tokenizer, italian_lines).tokens_per_word]
    candidates = top_k_new_tokens(smollm2_tokenizer, italian_bytelevel, italian_train_lines)
    for k in (100, 500):
        expansion = expand_vocabulary(smollm2_tokenizer, candidates, max_new_tokens=k)
        fertilities.append(fertility_report(expansion.tokenizer, italian_lines).tokens_per_word)
    full = expand_with_target(smollm2_tokenizer, italian_bytelevel)
    fertilities.append(fertility_report(full.tokenizer, italian_lines).tokens_per_word)
    assert fertilities == sorted(fertilities, reverse=True) and len(set(fertilities)) == 4


def test_top_k_order_is_by_frequency(smollm2_tokenizer, italian_bytelevel, italian_lines):
    from collections import Counter

    from vocadapt.components.tokenizers.canonical import canonical_index

    candidates = top_k_new_tokens(smollm2_tokenizer, italian_bytelevel, italian_lines)
    counts = Counter(token_id for ids in _ids(italian_bytelevel, italian_lines) for token_id in ids)
    aux_index, source_index = canonical_index(italian_bytelevel), canonical_index(smollm2_tokenizer)
    frequencies = [counts[aux_index[form]] for form in candidates]
    assert frequencies == sorted(frequencies, reverse=True) and frequencies[-1] > 0
    assert not any(form in source_index for form in candidates)


def _llama3_style(tokenizer, folder):
    """The byte-level tokenizer rebuilt as Llama-3 stores it: ignore_merges, merges as pairs, specials at the end."""
    data = json.loads(tokenizer.backend_tokenizer.to_str())
    data["model"]["ignore_merges"] = True
    data["model"]["merges"] = [list(merge) if not isinstance(merge, str) else merge.split(" ") for merge in
                               data["model"]["merges"]]  # fmt: skip
    top = max(data["model"]["vocab"].values()) + 1
    data["added_tokens"].append({"id": top, "content": "<|begin_of_text|>", "single_word": False, "lstrip": False,
                                 "rstrip": False, "normalized": False, "special": True})  # fmt: skip
    tokenizer.save_pretrained(folder)
    (folder / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return load_pretrained_tokenizer(folder)


def test_llama3_style_keeps_ignore_merges_and_pairs(trained, italian_bytelevel, italian_train_lines, english_lines,
                                                    tmp_path):  # fmt: skip
    source = _llama3_style(trained["bytelevel-bpe"], tmp_path / "llama3")
    expansion = expand_with_top_k(source, italian_bytelevel, italian_train_lines, 300, protect=english_lines)
    data = json.loads(expansion.tokenizer.backend_tokenizer.to_str())
    assert data["model"]["ignore_merges"] is True
    assert all(isinstance(merge, list) for merge in data["model"]["merges"])
    assert min(expansion.new_token_ids) == len(source)  # after the special token at the end
    assert unreachable_tokens(expansion.tokenizer, expansion.new_token_ids) == []
    assert _ids(expansion.tokenizer, english_lines) == _ids(source, english_lines)


def test_sentencepiece_bpe_with_delta_v(trained, italian_train, english_lines, italian_lines, tmp_path):
    source = trained["spm-bpe"]
    target = train_tokenizer([italian_train], TokenizerTrainingSpec("spm-bpe", 1500),
                             tmp_path / "target", show_progress=False)
    delta = delta_vocabulary(source, target)
    expansion = expand_with_target(source, target, protect=english_lines)
    # A 600-piece source shares many English subwords ('▁data') with ΔV: protection skips those, and the source's
    # own splits skip ΔV's numbers and symbol runs ('▁2', '▁«'); nothing else.
    assert set(expansion.skipped) <= {"would change protected source-language text", SPLITS_REASON}
    assert len(expansion.new_token_ids) > len(delta) / 2
    assert unreachable_tokens(expansion.tokenizer, expansion.new_token_ids) == []
    assert _ids(expansion.tokenizer, english_lines) == _ids(source, english_lines)
    tokenizer = expansion.tokenizer
    assert all(tokenizer.decode(ids) == line for ids, line in zip(_ids(tokenizer, italian_lines), italian_lines))
    before = fertility_report(source, italian_lines).tokens_per_word
    assert fertility_report(tokenizer, italian_lines).tokens_per_word < before


def test_expanding_wordpiece_is_refused(trained, italian_bytelevel):
    with pytest.raises(ValueError, match="byte-level or sentencepiece BPE"):
        expand_vocabulary(trained["wordpiece"], canonical_tokens(italian_bytelevel)[300:310])


ENGLISHISH = st.text(st.sampled_from(list("abcdefghilmnoprstuvwyzTHEAI ,.;'-\n")), min_size=1, max_size=80)


@FAST
@given(text=ENGLISHISH)
def test_text_changes_only_if_it_contains_a_new_token(smollm2_tokenizer, smollm2_top_1000, text):
    """The expansion invariant as a property: a text tokenizes differently only if it holds a new token's text."""
    tokenizer = smollm2_top_1000.tokenizer
    if _ids(tokenizer, [text]) != _ids(smollm2_tokenizer, [text]):
        forms = canonical_tokens(tokenizer)
        assert any(forms[i].text_bytes.decode("utf-8", "replace") in text for i in smollm2_top_1000.new_token_ids)


def test_lexicon_texts_hold_every_casing_alone_and_after_a_space():
    texts = lexicon_texts(["perché", "Word", "perché", " "])
    assert texts == ["perché", " perché", "Perché", " Perché", "PERCHÉ", " PERCHÉ",
                     "Word", " Word", "word", " word", "WORD", " WORD"]  # fmt: skip


@pytest.fixture(scope="module")
def italian_candidates(smollm2_tokenizer, italian_bytelevel, italian_train_lines):
    return top_k_new_tokens(smollm2_tokenizer, italian_bytelevel, italian_train_lines)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(ENGLISHISH, min_size=1, max_size=6))
def test_protected_text_never_changes(smollm2_tokenizer, italian_candidates, texts):
    """The guard is exact: whatever the protected text, it tokenizes as before after 500 Italian tokens."""
    expansion = expand_vocabulary(smollm2_tokenizer, italian_candidates, max_new_tokens=500, protect=texts)
    assert _ids(expansion.tokenizer, texts) == _ids(smollm2_tokenizer, texts)


def test_english_lexicon_keeps_unseen_english_identical(smollm2_tokenizer, italian_candidates, fixture_corpora,
                                                         english_lines, embedded_assets):  # fmt: skip
    """Expansion leaves English tokenization unchanged, on real text never protected as a document: the 150
    held-out English paragraphs keep their tokens when SmolLM2 gains 250 or 1,000 Italian tokens, protected by the
    English training slice and Debian's English word list (every casing), built once for both expansions."""
    lexicon = embedded_assets.lexicon("en")
    if lexicon is None:
        pytest.skip("the embedded assets have no English word list (apt-get download failed when they were built)")
    english_train = fixture_corpora["en.train"].read_text(encoding="utf-8").splitlines()
    guard = protected_source_text(smollm2_tokenizer, english_train, lexicon.read_text(encoding="utf-8").split())
    for k in (250, 1000):
        expansion = expand_vocabulary(smollm2_tokenizer, italian_candidates, max_new_tokens=k, protect=guard)
        assert len(expansion.new_token_ids) == k
        assert _ids(expansion.tokenizer, english_lines) == _ids(smollm2_tokenizer, english_lines)
        assert unreachable_tokens(expansion.tokenizer, expansion.new_token_ids) == []


def test_gemma3_sentencepiece_expansion(gemma3_tokenizer, trained, italian_train, english_lines, italian_lines,
                                        fixture_corpora, tmp_path):  # fmt: skip
    """A real 262,144-token sentencepiece BPE (merges ordered by score) gains the Italian pieces it lacks: all
    reachable, English unchanged, Italian round-trips and needs fewer tokens."""
    target = train_tokenizer([italian_train], TokenizerTrainingSpec("spm-bpe", 3000),
                             tmp_path / "target", show_progress=False)
    english_train = fixture_corpora["en.train"].read_text(encoding="utf-8").splitlines()
    expansion = expand_with_target(gemma3_tokenizer, target, protect=english_train)
    tokenizer = expansion.tokenizer
    assert len(expansion.new_token_ids) > 500 and min(expansion.new_token_ids) == len(gemma3_tokenizer)
    assert unreachable_tokens(tokenizer, expansion.new_token_ids) == []
    assert _ids(tokenizer, english_lines) == _ids(gemma3_tokenizer, english_lines)
    assert all(tokenizer.decode(ids) == line for ids, line in zip(_ids(tokenizer, italian_lines), italian_lines))
    before = fertility_report(gemma3_tokenizer, italian_lines).tokens_per_word
    assert fertility_report(tokenizer, italian_lines).tokens_per_word < before


def test_protected_words_union_guards_what_either_guards():
    from vocadapt.components.tokenizers._merges import ProtectedWords

    first = ProtectedWords([("Ġhello", ["Ġhel", "lo"])])
    second = ProtectedWords([("Ġworld", ["Ġwor", "ld"]), ("é", ["Ã", "©"])])
    union = first | second
    for merges, characters in (([("Ġhel", "lo")], []), ([("Ġwor", "ld")], []), ([], ["é"]), ([("a", "b")], ["z"])):
        expected = first.changed_by(merges, [], characters) or second.changed_by(merges, [], characters)
        assert union.changed_by(merges, [], characters) == expected
    with pytest.raises(ValueError, match="ignore_merges"):
        first | ProtectedWords([], ignore_merges=True)
