"""The id layouts of real tokenizers, built tiny: expansion keeps every added token's id or refuses the input.

Llama-3 keeps its 256 specials above the BPE vocabulary (128,000-128,255), Gemma-3 keeps 6,414 added tokens inside
it at their own ids and ``<image_soft_token>`` above it (262,144), DeepSeek-V3 has three inside (0-2) and 815
above. These tests build each layout on a 300-token byte-level BPE, plus the layouts no family has but a hand-edited
tokenizer.json can: gaps in the ids, and an added token that shares its id with another vocabulary entry.
"""

from __future__ import annotations

import json

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from vocadapt.components.errors import UserError
from vocadapt.components.tokenizers import expand
from vocadapt.components.tokenizers.expand import check_source_ids, expand_with_top_k, unreachable_tokens
from vocadapt.components.tokenizers.replace import replace_vocabulary

LINES = [
    "la casa è bella e grande, la città è antica",
    "il gatto dorme sulla sedia della cucina",
    "perché la montagna è alta e la strada è lunga",
    "the cat sleeps on the chair in the kitchen",
] * 20


def _bpe(vocab_size: int, specials: list[str]) -> dict:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # fmt: skip
    tokenizer.train_from_iterator(LINES, trainer=trainer)
    return json.loads(tokenizer.to_str())


def _added_entry(content: str, token_id: int, special: bool = True) -> dict:
    return {"id": token_id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": not special, "special": special}  # fmt: skip


def _load(data: dict, **roles) -> PreTrainedTokenizerFast:
    """The tokenizer as ``tokenizers`` loads that JSON (added tokens outside the vocabulary get ids then)."""
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(data)), **roles)


@pytest.fixture(scope="module")
def auxiliary():
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(_bpe(420, ["<|endoftext|>"]))))


def _ids(tokenizer) -> dict[str, tuple[int, bool]]:
    decoder = tokenizer.backend_tokenizer.get_added_tokens_decoder()
    return {token.content: (token_id, token.special) for token_id, token in decoder.items()}


def _llama3_layout() -> PreTrainedTokenizerFast:
    """300 BPE ids, then four specials above them, none in the vocabulary (Llama-3.1's layout)."""
    data = _bpe(300, [])
    size = len(data["model"]["vocab"])
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|eot_id|>"]
    data["added_tokens"] = [_added_entry(content, size + i) for i, content in enumerate(specials)]
    return _load(data, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>")


def _check_kept(source, expansion) -> None:
    tokenizer = expansion.tokenizer
    assert _ids(tokenizer) == _ids(source)
    assert (tokenizer.bos_token_id, tokenizer.eos_token_id) == (source.bos_token_id, source.eos_token_id)
    highest = max(max(source.get_vocab().values()), *source.backend_tokenizer.get_added_tokens_decoder())
    new = expansion.new_token_ids
    assert len(new) >= 15 and new == list(range(highest + 1, highest + 1 + len(new)))  # after every id in use
    assert unreachable_tokens(tokenizer, expansion.new_token_ids) == []
    text = "<|begin_of_text|>la casa è bella<|eot_id|>"
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text


def test_specials_above_the_vocabulary_keep_their_ids(auxiliary):
    source = _llama3_layout()
    expansion = expand_with_top_k(source, auxiliary, LINES, 20)
    _check_kept(source, expansion)


def test_without_the_fix_the_specials_move_and_nothing_is_returned(auxiliary, monkeypatch):
    """The reported bug: new tokens appended after the specials moved them to len(vocab); the check catches it."""
    monkeypatch.setattr(expand, "_hold_added_tokens", lambda data: None)
    with pytest.raises(RuntimeError, match=r"moved special or added tokens .*<\|begin_of_text\|>"):
        expand_with_top_k(_llama3_layout(), auxiliary, LINES, 20)


def test_added_tokens_inside_the_vocabulary_and_gaps_keep_their_ids(auxiliary):
    """Gemma-3 / DeepSeek-V3: specials and ordinary added tokens inside the vocabulary at their own ids (one of them
    an ordinary vocabulary entry marked as added), one far above the rest with a gap of unused ids before it."""
    data = _bpe(300, ["<pad>", "<bos>"])
    vocab = data["model"]["vocab"]
    size = len(vocab)
    shared = next(piece for piece in vocab if piece == "Ġthe")  # a normal token the family also lists as added
    vocab["<image_soft_token>"] = size + 10  # in the vocabulary, ids size..size+9 unused
    data["added_tokens"] += [_added_entry(shared, vocab[shared], special=False),
                             _added_entry("<image_soft_token>", size + 10),
                             _added_entry("<|begin_of_text|>", size + 11),
                             _added_entry("<|eot_id|>", size + 12)]  # fmt: skip
    source = _load(data, pad_token="<pad>", bos_token="<bos>", eos_token="<|eot_id|>")
    # tokenizers gives added tokens outside the vocabulary ids from len(vocab) = size + 1 on: a gap remains between
    # them and <image_soft_token>
    assert {t: i for t, (i, _) in _ids(source).items() if t.startswith("<|") or t.startswith("<i")} == {
        "<image_soft_token>": size + 10, "<|begin_of_text|>": size + 1, "<|eot_id|>": size + 2}  # fmt: skip
    expansion = expand_with_top_k(source, auxiliary, LINES, 20)
    _check_kept(source, expansion)
    assert expansion.new_token_ids[0] == size + 11
    assert expansion.tokenizer.encode(" the", add_special_tokens=False) == [vocab[shared]]  # still itself


def test_an_added_token_sharing_an_id_with_another_token_is_refused(auxiliary):
    """A vocabulary with a hole (its last entry moved up one id): ``tokenizers`` then gives the first added token
    the id of that entry, so one id means two tokens; expansion refuses before any work, naming both."""
    data = _bpe(300, [])
    vocab = data["model"]["vocab"]
    last = max(vocab, key=vocab.get)
    vocab[last] += 1
    data["added_tokens"] = [_added_entry("<|begin_of_text|>", vocab[last])]
    source = _load(data, bos_token="<|begin_of_text|>")
    assert source.convert_tokens_to_ids("<|begin_of_text|>") == vocab[last]
    with pytest.raises(UserError, match=r"<\|begin_of_text\|>.*id \d+.*one id, two tokens"):
        expand_with_top_k(source, auxiliary, LINES, 20)


@pytest.mark.parametrize("added, message", [
    ([_added_entry("<s>", 3)], "vocabulary holds it at id 0"),
    ([_added_entry("<x>", 5), _added_entry("<y>", 5)], "share id 5"),
])  # fmt: skip
def test_other_ambiguous_ids_in_a_tokenizer_json_are_refused(added, message):
    """Layouts ``tokenizers`` never loads into memory but a tokenizer.json may hold: refused, naming the ids."""
    data = {"model": {"vocab": {"<s>": 0, "a": 1, "b": 2}}, "added_tokens": added}
    with pytest.raises(UserError, match=message):
        check_source_ids(data)


def test_replace_makes_a_special_the_target_holds_as_a_normal_token_special_at_its_id():
    source = _llama3_layout()
    data = _bpe(300, [])
    data["model"]["vocab"]["<|eot_id|>"] = len(data["model"]["vocab"])  # a normal entry of the target
    target = _load(data)
    replacement = replace_vocabulary(source, target)
    tokenizer = replacement.tokenizer
    eot = target.convert_tokens_to_ids("<|eot_id|>")
    assert _ids(tokenizer)["<|eot_id|>"] == (eot, True)
    assert replacement.target_to_source[eot] == source.convert_tokens_to_ids("<|eot_id|>")
    assert replacement.target_to_source[tokenizer.bos_token_id] == source.bos_token_id
    assert replacement.added_special_tokens == ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>"]


def test_replace_refuses_a_target_whose_ids_skip_one():
    """Appending to a vocabulary with a hole would put the family's specials on ids the target already uses."""
    data = _bpe(300, [])
    vocab = data["model"]["vocab"]
    vocab[max(vocab, key=vocab.get)] += 1
    with pytest.raises(UserError, match="ids already in use"):
        replace_vocabulary(_llama3_layout(), _load(data))
