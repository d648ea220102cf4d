"""Expansion never changes how source-language numbers, dates, versions, prices, code and URLs are tokenized: the
rule read from the source vocabulary (``SourceSplits``) refuses new tokens that join what no source token joins."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vocadapt.components.tokenizers._source_splits import SourceSplits
from vocadapt.components.tokenizers.canonical import canonical_tokens
from vocadapt.components.tokenizers.expand import (
    SPLITS_REASON,
    expand_vocabulary,
    protected_source_text,
    top_k_new_tokens,
    unreachable_tokens,
)
from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, train_tokenizer

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _ids(tokenizer, texts):
    return tokenizer(list(texts), add_special_tokens=False)["input_ids"]


@pytest.fixture(scope="module")
def italian_candidates(smollm2_tokenizer, italian_train, tmp_path_factory):
    """New tokens of a byte-level BPE trained on the Italian slice, most frequent first; it learns digit merges."""
    auxiliary = train_tokenizer([italian_train], TokenizerTrainingSpec("bytelevel-bpe", 3000),
                                tmp_path_factory.mktemp("aux") / "t", show_progress=False)  # fmt: skip
    lines = italian_train.read_text(encoding="utf-8").splitlines()
    return top_k_new_tokens(smollm2_tokenizer, auxiliary, lines)


@pytest.fixture(scope="module")
def expanded(smollm2_tokenizer, italian_candidates):
    """SmolLM2 with 1,000 Italian tokens and no protection at all: only the source's own splits guard numbers."""
    return expand_vocabulary(smollm2_tokenizer, italian_candidates, max_new_tokens=1000)


@pytest.fixture(scope="module")
def english_lexicon(embedded_assets) -> list[str]:
    lexicon = embedded_assets.lexicon("en")
    if lexicon is None:
        pytest.skip("the embedded assets have no English word list (apt-get download failed when they were built)")
    return lexicon.read_text(encoding="utf-8").split()


@pytest.fixture(scope="module")
def expanded_with_lexicon(smollm2_tokenizer, italian_candidates, english_lexicon):
    """The product's setting: the English word list protects words, the source's splits protect the rest."""
    guard = protected_source_text(smollm2_tokenizer, [], english_lexicon)
    return expand_vocabulary(smollm2_tokenizer, italian_candidates, max_new_tokens=1000, protect=guard)


def test_italian_candidates_would_change_numbers_without_the_rule(smollm2_tokenizer, italian_candidates, expanded):
    """The Italian tokenizer does learn digit and space+digit tokens; appended, they change English numbers. With
    the rule they are refused (and counted), and the 1,000 tokens are still added, all reachable."""
    texts = [" 2024", " 10 items", "version 1.20.3", "$1,250.00", "x = 100"]
    unguarded = expand_vocabulary(smollm2_tokenizer, italian_candidates, max_new_tokens=1000, keep_source_splits=False)
    assert _ids(unguarded.tokenizer, texts) != _ids(smollm2_tokenizer, texts)
    assert _ids(expanded.tokenizer, texts) == _ids(smollm2_tokenizer, texts)
    assert expanded.skipped[SPLITS_REASON] > 0 and len(expanded.new_token_ids) == 1000
    assert unreachable_tokens(expanded.tokenizer, expanded.new_token_ids) == []
    forms = canonical_tokens(expanded.tokenizer)
    added = [forms[i].text_bytes.decode("utf-8", "replace") for i in expanded.new_token_ids]
    assert not any(character.isdigit() for text in added for character in text)


def _bytelevel(text: str) -> str:
    from vocadapt.components.tokenizers._backend import bytes_to_unicode

    alphabet = bytes_to_unicode()
    return "".join(alphabet[byte] for byte in text.encode("utf-8"))


def test_the_rule_is_read_from_the_source_vocabulary(smollm2_tokenizer, tmp_path):
    """SmolLM2 has no multi-digit token, so it refuses 'Ġ2' and '10'; a source trained on numbers has them, and
    refuses only runs of digits it does not hold itself."""
    smollm2 = SourceSplits(smollm2_tokenizer)
    assert smollm2.refuses(_bytelevel(" 2")) == "joins space and digit, which no source token does"
    assert smollm2.refuses(_bytelevel("10")) == "joins digit and digit, which no source token does"
    assert "re-splits '».'" in smollm2.refuses(_bytelevel("»."))
    assert "re-splits" in smollm2.refuses(_bytelevel(" " + "\n" * 12))
    assert smollm2.refuses(_bytelevel(" casa")) is None and smollm2.refuses(_bytelevel("è")) is None
    assert smollm2.refuses(_bytelevel("è")[:1]) is None  # the first byte of 'è', an intermediate
    corpus = tmp_path / "numbers.txt"
    corpus.write_text("\n".join(f"in {year} we paid {year % 97} euros" for year in range(1900, 2100)) * 5)
    numeric = SourceSplits(train_tokenizer([corpus], TokenizerTrainingSpec("bytelevel-bpe", 400),
                                           tmp_path / "numeric", show_progress=False))
    assert ("digit", "digit") in numeric.class_pairs and ("space", "digit") in numeric.class_pairs
    digit_runs = [run for run in numeric.symbol_runs if len(run) > 1 and any(c.isdigit() for c in run)]
    assert digit_runs and all(numeric.refuses(_bytelevel(run)) is None for run in digit_runs)
    assert numeric.refuses(_bytelevel(" 123456789")) == (
        "re-splits ' 123456789', a run of digits, spaces or symbols no source token holds")


NUMBERS = st.one_of(
    st.integers(-10**12, 10**12).map(str),
    st.integers(0, 10**9).map(lambda n: f"{n:,}"),
    st.floats(-1e6, 1e6, allow_nan=False).map(lambda x: f"{x:.3f}"),
    st.floats(0, 100).map(lambda x: f"{x:.1f}%"),
    st.integers(0, 2**32).map(lambda n: hex(n)),
)
DATES = st.builds(
    lambda day, style: day.strftime(style),
    st.dates(datetime.date(1000, 1, 1), datetime.date(2999, 12, 31)),
    st.sampled_from(["%Y-%m-%d", "%d/%m/%Y", "%m/%d/%y", "%Y.%m.%d", "%d-%m-%Y %H:%M", "%Y%m%d"]),
)
VERSIONS = st.builds(
    lambda parts, prefix, suffix: prefix + ".".join(map(str, parts)) + suffix,
    st.lists(st.integers(0, 2024), min_size=2, max_size=4), st.sampled_from(["", "v", "=="]),
    st.sampled_from(["", "-rc1", "-beta.2", "+build.17", ".post3"]),
)
PRICES = st.builds(
    lambda amount, template: template.format(amount=amount, whole=int(amount)),
    st.floats(0, 1e7, allow_nan=False),
    st.sampled_from(["${amount:,.2f}", "€{amount:.2f}", "£ {whole}", "{amount:.2f} EUR", "(${whole:,})", "-$0.99"]),
)
SPACES = st.sampled_from([" ", "  ", "\n", "\t", " - ", ", ", "; ", ": ", " (", ") ", "\n\n", " / ", " — "])
SYMBOLIC = st.lists(st.one_of(NUMBERS, DATES, VERSIONS, PRICES, SPACES), min_size=1, max_size=8).map("".join)


@PROPERTY
@given(text=SYMBOLIC)
def test_numbers_dates_versions_and_prices_keep_their_tokens(smollm2_tokenizer, expanded, text):
    """Without any protected document or word list, text of digits, symbols and spaces tokenizes as before."""
    assert _ids(expanded.tokenizer, [text]) == _ids(smollm2_tokenizer, [text])


IDENTIFIER_WORDS = ["value", "count", "index", "name", "total", "price", "user", "items", "data", "result", "path",
                    "file", "line", "page", "size", "list", "item", "key", "text", "number", "date", "time"]
IDENTIFIERS = st.lists(st.sampled_from(IDENTIFIER_WORDS), min_size=1, max_size=3).map("_".join)
CODE = st.builds(
    lambda template, a, b, n, m: template.format(a=a, b=b, n=n, m=m),
    st.sampled_from([
        "{a} = {b}({n}) + {m}", "def {a}({b}):\n    return {b} * {n}\n", "for {a} in range({n}, {m}):",
        "{a}[{n}] += 0x{m:x}", "if {a} >= {n}.{m}:\n\t{b} = None", "{a}.{b}({n}, {m}) # {n}/{m}",
        "const {a} = [{n}, {m}];", "{a} != {b} && {n} <= {m}", "print(f\"{{{a}}} {n:>4}\")",
    ]),
    IDENTIFIERS, IDENTIFIERS, st.integers(0, 10**6), st.integers(0, 10**6),
)
URLS = st.builds(
    lambda host, tld, a, b, n, m: f"https://www.{host}.{tld}/{a}/{b}/{n}?id={m}&page={n}#{a}",
    st.sampled_from(IDENTIFIER_WORDS), st.sampled_from(["com", "org", "net", "io"]), IDENTIFIERS, IDENTIFIERS,
    st.integers(0, 10**6), st.integers(0, 10**9),
)


@PROPERTY
@given(text=st.lists(st.one_of(CODE, URLS, SYMBOLIC), min_size=1, max_size=4).map(" ".join))
def test_code_and_urls_keep_their_tokens(smollm2_tokenizer, expanded_with_lexicon, text):
    """Code and URLs: the word list guards their words, the source's splits their numbers and symbols."""
    assert _ids(expanded_with_lexicon.tokenizer, [text]) == _ids(smollm2_tokenizer, [text])


def test_english_text_no_protection_saw_keeps_its_tokens(smollm2_tokenizer, expanded_with_lexicon, english_lines):
    """Held-out English paragraphs (help pages full of numbers, menus and paths), never given as a protected
    document, keep their tokens: the word list and the source's splits are the only guards."""
    assert any(character.isdigit() for line in english_lines for character in line)
    assert _ids(expanded_with_lexicon.tokenizer, english_lines) == _ids(smollm2_tokenizer, english_lines)
    assert len(expanded_with_lexicon.new_token_ids) == 1000
