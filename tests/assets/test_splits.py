"""The deterministic train / validation / test split and the de-duplication of units."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vocadapt.components.corpora import SPLITS, AlignedUnit, drop_duplicate_texts, split_of, split_units


def test_split_of_known_keys_never_changes():
    # Golden values: if these move, every built corpus moves and test text may leak into training.
    assert split_of("bible-diodati:01.001.001") == "train"
    observed = {key: split_of(key) for key in (f"bible-diodati:01.001.{v:03d}" for v in range(1, 60))}
    assert sorted(set(observed.values())) == ["test", "train", "validation"]
    first_test_keys = [k for k, s in observed.items() if s == "test"][:2]
    assert first_test_keys == ["bible-diodati:01.001.009", "bible-diodati:01.001.011"]


@settings(max_examples=50, deadline=None)
@given(st.text(min_size=1, max_size=40))
def test_split_depends_on_the_key_alone(key):
    assert split_of(key) in SPLITS
    assert split_of(key) == split_of(str(key))
    assert split_of(key, (1.0, 0.0, 0.0)) == "train"
    assert split_of(key, (0.0, 0.0, 1.0)) == "test"


def test_fractions_are_respected_roughly():
    counts = {name: 0 for name in SPLITS}
    for index in range(20_000):
        counts[split_of(f"unit:{index}")] += 1
    assert 0.88 < counts["train"] / 20_000 < 0.92
    assert 0.04 < counts["validation"] / 20_000 < 0.06
    assert 0.04 < counts["test"] / 20_000 < 0.06


@pytest.mark.parametrize("fractions", [(0.9, 0.05), (0.9, 0.2, 0.1), (1.1, -0.05, -0.05)])
def test_bad_fractions_are_refused(fractions):
    with pytest.raises(ValueError, match="fractions"):
        split_of("x", fractions)


def test_both_languages_of_a_unit_share_a_split_and_order_is_stable():
    units = [AlignedUnit(f"s:{i}", "s", {"en": f"e{i}", "it": f"i{i}"}) for i in range(500)]
    forward = split_units(units)
    backward = split_units(reversed(units))
    assert forward == backward
    assert sum(len(group) for group in forward.values()) == 500
    for split, group in forward.items():
        assert all(split_of(unit.key) == split for unit in group)
        assert [u.key for u in group] == sorted(u.key for u in group)


def test_duplicates_dropped_in_any_language_first_key_kept():
    units = [
        AlignedUnit("s:3", "s", {"en": "Tools", "it": "Strumenti"}),
        AlignedUnit("s:1", "s", {"en": "Tools", "it": "Strumenti"}),
        AlignedUnit("s:2", "s", {"en": "Tools", "it": "Attrezzi"}),
        AlignedUnit("s:4", "s", {"en": "Options", "it": "Strumenti"}),
        AlignedUnit("s:5", "s", {"en": "Help", "it": "Guida"}),
    ]
    assert [u.key for u in drop_duplicate_texts(units, ["en", "it"])] == ["s:1", "s:5"]
    assert [u.key for u in drop_duplicate_texts(units, ["en"])] == ["s:1", "s:4", "s:5"]


_units = st.lists(
    st.builds(
        lambda key, en, it: AlignedUnit(f"s:{key}", "s", {"en": en, "it": it}),
        st.integers(0, 10_000), st.sampled_from("abcdef"), st.sampled_from("uvwxyz"),
    ),
    max_size=30,
    unique_by=lambda unit: unit.key,
)


@settings(max_examples=40, deadline=None)
@given(_units, _units)
def test_adding_units_never_moves_existing_ones(first, second):
    extra = [unit for unit in second if unit.key not in {u.key for u in first}]
    alone = split_units(first)
    together = split_units(first + extra)
    for split in SPLITS:
        assert [u for u in together[split] if u in first] == alone[split]


@settings(max_examples=40, deadline=None)
@given(_units)
def test_deduplicated_units_have_distinct_texts_and_every_text_survives(units):
    kept = drop_duplicate_texts(units, ["en", "it"])
    for language in ("en", "it"):
        texts = [unit.texts[language] for unit in kept]
        assert len(texts) == len(set(texts))
    assert all(unit in units for unit in kept)
    # every unit dropped shares a text with a kept unit of smaller key
    for unit in units:
        if unit not in kept:
            assert any(k.key < unit.key and (k.texts["en"] == unit.texts["en"] or k.texts["it"] == unit.texts["it"])
                       for k in kept)
