"""Splitting one expansion budget across languages, and the balanced mix a multilingual tokenizer trains on."""

from __future__ import annotations

import pytest

from vocadapt.components.errors import UserError
from vocadapt.components.tokenizers.budget import (
    Candidate, LanguageCandidates, allocation, rank_candidates, split_budget,
)
from vocadapt.components.tokenizers.canonical import CanonicalToken
from vocadapt.components.tokenizers.mix import balanced_mix


def _token(text: str) -> CanonicalToken:
    return CanonicalToken(text.encode(), word_start=True)


def _language(name: str, words: int, *candidates: tuple[str, int, int]) -> LanguageCandidates:
    return LanguageCandidates(name, tuple(Candidate(_token(t), count, pieces) for t, count, pieces in candidates), words)


# Italian: a big corpus of well-split words; Russian: a small corpus where every candidate saves a lot per word.
ITALIAN = _language("it", 10_000, ("della", 500, 2), ("perché", 300, 2), ("questo", 200, 2), ("ancora", 100, 2))
RUSSIAN = _language("ru", 1_000, ("это", 100, 4), ("который", 80, 6), ("только", 60, 5), ("после", 10, 4))


def test_gain_orders_by_tokens_saved_per_word_of_each_language():
    ranked = rank_candidates([ITALIAN, RUSSIAN], "gain")
    # ru 'который' saves 80*5/1000 = 0.4 per word; it 'della' 500*1/10000 = 0.05
    assert [c.token.data.decode() for c in ranked[:3]] == ["который", "это", "только"]
    assert ranked[0].gain == pytest.approx(0.4) and ranked[0].language == "ru"
    # then it 'della' (0.05) before ru 'после' (0.03), which ties with it 'perché' and comes after it (order given)
    assert split_budget([ITALIAN, RUSSIAN], 3, "gain") == {"it": 0, "ru": 3}
    assert split_budget([ITALIAN, RUSSIAN], 4, "gain") == {"it": 1, "ru": 3}
    assert [c.token.data.decode() for c in ranked[3:6]] == ["della", "perché", "после"]


def test_a_big_corpus_does_not_swamp_a_small_one():
    # the same relative savings at ten times the corpus: the same order
    bigger = _language("it", 100_000, *((c.token.data.decode(), c.count * 10, c.source_pieces)
                                        for c in ITALIAN.candidates))
    def names(entries):
        return [c.token.data.decode() for c in rank_candidates(entries, "gain")]
    assert names([bigger, RUSSIAN]) == names([ITALIAN, RUSSIAN])


def test_even_split_takes_turns():
    assert split_budget([ITALIAN, RUSSIAN], 4, "even") == {"it": 2, "ru": 2}
    assert split_budget([ITALIAN, RUSSIAN], 5, "even") == {"it": 3, "ru": 2}
    ranked = rank_candidates([ITALIAN, RUSSIAN], "even")
    assert [c.token.data.decode() for c in ranked[:4]] == ["della", "это", "perché", "который"]


def test_a_shared_token_is_listed_once_with_its_gains_summed():
    german = _language("de", 1_000, ("Roma", 50, 3), ("und", 40, 2))
    italian = _language("it", 1_000, ("Roma", 30, 3), ("della", 40, 2))
    ranked = rank_candidates([german, italian], "gain")
    assert [c.token.data.decode() for c in ranked] == ["Roma", "und", "della"]
    assert ranked[0].gain == pytest.approx((50 * 2 + 30 * 2) / 1000) and ranked[0].language == "de"
    even = rank_candidates([german, italian], "even")
    assert [(c.token.data.decode(), c.language) for c in even] == [("Roma", "de"), ("della", "it"), ("und", "de")]


def test_a_language_with_fewer_candidates_leaves_the_rest_to_the_others():
    short = _language("ru", 1_000, ("это", 100, 4))
    assert split_budget([ITALIAN, short], 4, "even") == {"it": 3, "ru": 1}
    assert allocation(rank_candidates([ITALIAN, short]), 100, ["it", "ru"]) == {"it": 4, "ru": 1}


def test_bad_inputs_are_refused():
    with pytest.raises(UserError, match="budget rule"):
        rank_candidates([ITALIAN], "proportional")
    with pytest.raises(UserError, match="listed twice"):
        rank_candidates([ITALIAN, ITALIAN])
    with pytest.raises(UserError, match="no words"):
        rank_candidates([_language("it", 0)])


def test_balanced_mix_gives_every_language_the_same_share():
    lines = {"it": [f"it {i}" for i in range(100)], "ru": [f"ru {i}" for i in range(10)] + [" "]}
    mixed = balanced_mix(lines, seed=1)
    assert sum(line.startswith("it") for line in mixed) == sum(line.startswith("ru") for line in mixed) == 10
    assert balanced_mix(lines, seed=1) == mixed and balanced_mix(lines, seed=2) != mixed
    capped = balanced_mix(lines, max_lines=8, seed=1)
    assert sum(line.startswith("ru") for line in capped) == 4 and len(capped) == 8
    with pytest.raises(UserError, match="no text for ru"):
        balanced_mix({"it": ["a"], "ru": [" "]})


def test_gain_divides_each_saving_by_the_ids_the_token_takes():
    # 'который' saves most, but needs 7 ids with its intermediates: 0.4 / 7 per id, below 'это' (0.3 / 1)
    costs = {_token("который"): 7, _token("это"): 1}
    ranked = rank_candidates([ITALIAN, RUSSIAN], "gain", costs)
    assert [c.token.data.decode() for c in ranked[:3]] == ["это", "только", "который"]
    assert [c.token.data.decode() for c in rank_candidates([ITALIAN, RUSSIAN], "saving", costs)][:2] == [
        "который", "это"]
