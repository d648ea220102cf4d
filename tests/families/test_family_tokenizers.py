"""Replace and expand on every family's real tokenizer: specials, added tokens, chat template, round trips, numbers.

Each family is adapted twice, once per recipe, on the embedded Italian corpus:
- replace: a target tokenizer trained ``like`` the family (byte-level BPE for Llama-3.1, Qwen3 and DeepSeek-V3,
  sentencepiece BPE with byte fallback for Llama-2, Mistral and Gemma-3), then ``replace_vocabulary``;
- expand: ``expand_with_top_k`` with the 500 most frequent new tokens of a small auxiliary byte-level tokenizer,
  with 100 English paragraphs protected.
Every family's own tokenizer round-trips every paragraph used here exactly (measured: 400 of 400 Italian and
English paragraphs for each of the six), so the rule is exact equality before and after.
"""

from __future__ import annotations

import itertools
import re

import pytest

from tests.families.conftest import FAMILIES
from vocadapt.components.tokenizers._wrap import inserts_bos_eos
from vocadapt.components.tokenizers.expand import expand_with_top_k, unreachable_tokens
from vocadapt.components.tokenizers.replace import replace_vocabulary
from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, train_tokenizer_from_iterator
from vocadapt.platform.families.catalogue import model_family

TOP_K = 500
NUMBERS = "Nel 2024 ho pagato 12345 euro, il 3 marzo."
CONVERSATION = [
    {"role": "user", "content": "Ciao! Quanto costa il biglietto per Roma?"},
    {"role": "assistant", "content": "Costa 45 euro, andata e ritorno."},
    {"role": "user", "content": "And in English, please."},
]
DIGIT_GROUPS = {"digit-triples": ["202", "4", "123", "45", "3"], "single-digits": list("2024123453")}


def _lines(path, count: int) -> list[str]:
    with open(path, encoding="utf-8") as handle:
        return list(itertools.islice((line.strip() for line in handle if line.strip()), count))


@pytest.fixture(scope="module")
def corpora(embedded_assets) -> dict[str, list[str]]:
    root = embedded_assets.home / "corpora"
    return {
        "train": _lines(root / "it" / "train.txt", 5000),
        "it": _lines(root / "it" / "test.txt", 100),
        "en": _lines(root / "en" / "test.txt", 100),
    }


@pytest.fixture(scope="module")
def auxiliary(corpora, tmp_path_factory):
    """The '0.01GB' recipe's auxiliary tokenizer: 6,000 byte-level BPE tokens on 5,000 Italian lines (< 1 s)."""
    return train_tokenizer_from_iterator(iter(corpora["train"]), TokenizerTrainingSpec("bytelevel-bpe", 6000),
                                         tmp_path_factory.mktemp("aux") / "it", show_progress=False)  # fmt: skip


@pytest.fixture(scope="module", params=FAMILIES)
def adapted(request, load_family_tokenizer, corpora, auxiliary, tmp_path_factory):
    """(name, source, expansion, replacement) for one family; pytest runs every test of a family before building
    the next (a module-scoped parameter), so each is built once (Gemma-3's 262K: about 30 s of CPU)."""
    name = request.param
    source = load_family_tokenizer(name)
    expansion = expand_with_top_k(source, auxiliary, corpora["train"], TOP_K, protect=corpora["en"])
    spec = TokenizerTrainingSpec(model_family(name).tokenizer["kind"], 8000, like=source)
    target = train_tokenizer_from_iterator(iter(corpora["train"]), spec, tmp_path_factory.mktemp(name) / "target",
                                           show_progress=False)
    return name, source, expansion, replace_vocabulary(source, target)


def _added(tokenizer) -> dict[int, tuple[str, bool]]:
    return {i: (t.content, t.special) for i, t in tokenizer.backend_tokenizer.get_added_tokens_decoder().items()}


ROLES = ("bos", "eos", "pad", "unk")


def _roles(tokenizer) -> dict[str, tuple]:
    return {role: (getattr(tokenizer, f"{role}_token"), getattr(tokenizer, f"{role}_token_id")) for role in ROLES}


def _round_trips(tokenizer, texts) -> list[str]:
    """The texts that do not come back exactly from decode(encode(text))."""
    encoded = tokenizer(texts, add_special_tokens=False)["input_ids"]
    return [text for text, ids in zip(texts, encoded) if tokenizer.decode(ids) != text]


def test_expand_keeps_every_added_token_and_gives_new_tokens_fresh_ids(adapted):
    _, source, expansion, _ = adapted
    tokenizer = expansion.tokenizer
    assert _added(tokenizer) == _added(source)  # every special and reserved token: same id, text and flag
    assert _roles(tokenizer) == _roles(source)
    assert inserts_bos_eos(tokenizer) == inserts_bos_eos(source)
    highest = max(max(source.get_vocab().values()), *_added(source))
    assert len(expansion.new_token_ids) == TOP_K
    assert expansion.new_token_ids == list(range(highest + 1, highest + 1 + TOP_K))
    assert not set(expansion.new_token_ids) & set(_added(tokenizer))
    assert len(tokenizer) == len(source) + TOP_K
    assert unreachable_tokens(tokenizer, expansion.new_token_ids) == []
    for token_id in expansion.new_token_ids[:50]:  # no new id decodes to a special in the middle of a word
        assert tokenizer.convert_ids_to_tokens(token_id) not in tokenizer.all_special_tokens


def test_expand_keeps_text_the_family_way(adapted, corpora):
    _, source, expansion, _ = adapted
    tokenizer = expansion.tokenizer
    texts = corpora["it"] + corpora["en"]
    assert _round_trips(source, texts) == []  # the family's own rule: exact round trips on these paragraphs
    assert _round_trips(tokenizer, texts) == []
    english = corpora["en"]  # protected: identical ids, paragraph by paragraph
    assert tokenizer(english, add_special_tokens=False)["input_ids"] == source(english, add_special_tokens=False)[
        "input_ids"]  # fmt: skip
    italian_before = sum(map(len, source(corpora["it"], add_special_tokens=False)["input_ids"]))
    italian_after = sum(map(len, tokenizer(corpora["it"], add_special_tokens=False)["input_ids"]))
    assert italian_after < 0.95 * italian_before  # the new tokens are used: expansion did something


def test_expand_keeps_text_after_a_special_token_the_family_way(adapted, corpora):
    """Text right after a special token, as a rendered chat template has it ("<s>[INST] ..."), is split as the
    source splits it: Mistral-7B-v0.1's tokenizer puts a '▁' before the text after each special token ("legacy"),
    a setting transformers 5 does not save, so the expansion, reloaded from a folder, lost it once."""
    _, source, expansion, _ = adapted
    specials = [token for token in (source.bos_token, source.eos_token) if token]
    texts = [special + text for special in specials for text in [*corpora["en"][:10], "Ciao", "[INST] Ciao"]]
    assert expansion.tokenizer(texts, add_special_tokens=False)["input_ids"] == source(
        texts, add_special_tokens=False)["input_ids"]


def test_expand_keeps_the_family_number_rule(adapted):
    name, source, expansion, _ = adapted
    digits = [_digit_pieces(t.tokenize(NUMBERS)) for t in (source, expansion.tokenizer)]
    assert digits[0] == digits[1] == DIGIT_GROUPS[model_family(name).tokenizer["numbers"]]


def _digit_pieces(tokens: list[str]) -> list[str]:
    """The digit runs of each token that holds a digit (byte pieces <0x32> read as their digit)."""
    text = [chr(int(t[3:5], 16)) if re.fullmatch(r"<0x[0-9A-F]{2}>", t) else t for t in tokens]
    return ["".join(re.findall(r"\d", t)) for t in text if re.search(r"\d", t)]


def test_chat_template_renders_the_same_after_both_recipes(adapted):
    name, source, expansion, replacement = adapted
    if not source.chat_template:
        # a base model: neither recipe may give it one
        assert expansion.tokenizer.chat_template is None and replacement.tokenizer.chat_template is None, name
        return
    rendered = source.apply_chat_template(CONVERSATION, tokenize=False, add_generation_prompt=True)
    for tokenizer in (expansion.tokenizer, replacement.tokenizer):
        assert tokenizer.apply_chat_template(CONVERSATION, tokenize=False, add_generation_prompt=True) == rendered
        ids = tokenizer.apply_chat_template(CONVERSATION, tokenize=True, add_generation_prompt=True)
        ids = ids["input_ids"] if hasattr(ids, "keys") else ids
        assert tokenizer.decode(ids) == rendered


def test_replace_carries_every_added_token_with_its_role_and_source_row(adapted, corpora):
    _, source, _, replacement = adapted
    tokenizer = replacement.tokenizer
    added = _added(tokenizer)
    for source_id, (content, special) in _added(source).items():
        token_id = tokenizer.convert_tokens_to_ids(content)
        assert added.get(token_id) == (content, special), content  # Qwen3's <think> stays an ordinary added token
        assert replacement.target_to_source.get(token_id) == source_id, content  # its row is the source's
    for role in ROLES:
        assert getattr(tokenizer, f"{role}_token") == getattr(source, f"{role}_token")
    assert replacement.source_special_token_ids == {
        role: getattr(source, f"{role}_token_id") for role in ROLES if getattr(source, f"{role}_token") is not None
    }
    for role, token_id in replacement.special_token_ids.items():
        assert replacement.target_to_source[token_id] == replacement.source_special_token_ids[role]
    assert inserts_bos_eos(tokenizer) == inserts_bos_eos(source)
    assert _round_trips(tokenizer, corpora["it"] + corpora["en"]) == []
    assert len(replacement.new_token_ids) >= 100  # learned Italian tokens the family lacks: rows to initialise


def test_replace_with_a_foreign_target_appends_the_specials_and_template_tokens(adapted, auxiliary):
    """A target not trained ``like`` the family (the auxiliary tokenizer): the family's specials and the ordinary
    added tokens its chat template writes (Qwen3's <think>) are appended after the target's ids, with their flags,
    and keep their source rows."""
    name, source, _, _ = adapted
    replacement = replace_vocabulary(source, auxiliary)
    tokenizer, template = replacement.tokenizer, source.chat_template or ""
    added = _added(tokenizer)
    needed = {i: token for i, token in _added(source).items() if token[1] or token[0] in template}
    assert needed
    for source_id, (content, special) in needed.items():
        token_id = tokenizer.convert_tokens_to_ids(content)
        assert added.get(token_id) == (content, special), content
        assert replacement.target_to_source.get(token_id) == source_id, content
    appended = replacement.added_special_tokens + replacement.added_template_tokens
    assert sorted(tokenizer.convert_tokens_to_ids(appended)) == list(range(len(auxiliary), len(tokenizer)))
    assert ("<think>" in replacement.added_template_tokens) == (name == "qwen3")
    for role, token_id in replacement.special_token_ids.items():
        assert getattr(tokenizer, f"{role}_token") == getattr(source, f"{role}_token")
        assert replacement.target_to_source[token_id] == getattr(source, f"{role}_token_id")
    if template:
        assert tokenizer.apply_chat_template(CONVERSATION, tokenize=False) == source.apply_chat_template(
            CONVERSATION, tokenize=False)  # fmt: skip


def test_train_like_gemma3_below_what_it_carries_is_refused_naming_the_floor(load_family_tokenizer, tmp_path):
    with pytest.raises(ValueError, match=r"6,415 special and added tokens carried from `like` \+ 256 byte pieces; "
                                         r"raise it above 6,671"):  # fmt: skip
        train_tokenizer_from_iterator(iter(["ciao"]),
                                      TokenizerTrainingSpec("spm-bpe", 4000, like=load_family_tokenizer("gemma3")),
                                      tmp_path / "t", show_progress=False)  # fmt: skip
    assert not (tmp_path / "t").exists()
