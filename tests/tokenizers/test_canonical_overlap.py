"""Canonical token forms, overlap and the FVT decomposition across byte-level BPE, sentencepiece and WordPiece."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from vocadapt.components.tokenizers import CanonicalToken, canonical_tokens, source_pieces, token_overlap
from vocadapt.components.tokenizers.canonical import byte_token_ids, canonical_index

# Italian-ish text: letters with accents, punctuation, digits, runs of spaces, newlines and a 4-byte emoji.
ALPHABET = st.sampled_from(list("abcdeilmnoprstuzàèéìòù AEIOUÈ.,;:'’«»-0123456789\n😀") + ["  "])
TEXTS = st.lists(ALPHABET, min_size=1, max_size=40).map("".join)
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def joined_bytes(tokenizer, text: str, forms) -> bytes:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return b"".join(forms[i].text_bytes for i in ids)


def test_bytelevel_forms_are_bytes_and_word_start(smollm2_tokenizer):
    forms = canonical_tokens(smollm2_tokenizer)
    # 'Ġcos' + 'Ã¬' is the byte-level spelling of " café" (é = C3 A9).
    token_id = smollm2_tokenizer.convert_tokens_to_ids("ĠcafÃ©")
    assert forms[token_id] == CanonicalToken("café".encode(), word_start=True)
    assert forms[smollm2_tokenizer.convert_tokens_to_ids("Ã")] == CanonicalToken(b"\xc3", word_start=False)
    assert forms[smollm2_tokenizer.convert_tokens_to_ids("Ġ")] == CanonicalToken(b"", word_start=True)
    assert forms[smollm2_tokenizer.convert_tokens_to_ids("<|im_end|>")] == CanonicalToken(b"<|im_end|>", False, True)


def test_partial_utf8_tokens_stay_distinct(smollm2_tokenizer):
    """decode([id]) maps every partial-UTF-8 token to U+FFFD; canonical forms must not collide."""
    forms = [form for form in canonical_tokens(smollm2_tokenizer) if form is not None and not form.special]
    partial = [form for form in forms if form.data and not _valid_utf8(form.data)]
    assert len(partial) > 100
    assert len(set(forms)) == len(forms)


def _valid_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@FAST
@given(text=TEXTS)
def test_concatenated_forms_spell_the_text(space_keeping_forms, text):
    """For every kind that keeps spaces, the tokens' canonical bytes concatenate back to the text's bytes."""
    for tokenizer, forms in space_keeping_forms:
        assert joined_bytes(tokenizer, text, forms) == text.encode("utf-8")


@pytest.fixture(scope="module")
def space_keeping_forms(smollm2_tokenizer, trained):
    tokenizers = (smollm2_tokenizer, trained["spm-bpe"], trained["spm-unigram"], trained["bytelevel-bpe"])
    return [(tokenizer, canonical_tokens(tokenizer)) for tokenizer in tokenizers]


def test_sentencepiece_byte_pieces(trained):
    tokenizer = trained["spm-bpe"]
    forms = canonical_tokens(tokenizer)
    assert forms[tokenizer.convert_tokens_to_ids("<0xF0>")] == CanonicalToken(b"\xf0", False)
    assert forms[tokenizer.convert_tokens_to_ids("▁la")] == CanonicalToken(b"la", True)
    assert forms[tokenizer.convert_tokens_to_ids("<unk>")].special


def test_wordpiece_continuations(trained):
    tokenizer = trained["wordpiece"]
    vocab = tokenizer.get_vocab()
    continuation = next(piece for piece in sorted(vocab) if piece.startswith("##") and len(piece) > 3)
    assert canonical_tokens(tokenizer)[vocab[continuation]] == CanonicalToken(continuation[2:].encode(), False)
    assert canonical_tokens(tokenizer)[vocab["la"]] == CanonicalToken(b"la", True)


def test_overlap_matches_across_spellings(smollm2_tokenizer, trained):
    target = trained["spm-bpe"]
    overlap = token_overlap(smollm2_tokenizer, target)
    pairs = {"▁la": "Ġla", "▁e": "Ġe", "<0xC3>": "Ã", "è": "Ã¨"}
    for target_piece, source_piece in pairs.items():
        target_id = target.convert_tokens_to_ids(target_piece)
        assert overlap.target_to_source[target_id] == smollm2_tokenizer.convert_tokens_to_ids(source_piece)
    assert overlap.copied > 2 * overlap.shared_by_raw_string  # raw strings never match a "▁" piece
    assert overlap.copied + overlap.to_initialise == overlap.target_vocab_size == len(target)
    assert overlap.coverage_row()["coverage_percent"] == pytest.approx(100 * overlap.copied / len(target), abs=0.01)


def test_special_tokens_match_by_role(smollm2_tokenizer, trained):
    target = trained["spm-unigram"]
    overlap = token_overlap(smollm2_tokenizer, target)
    for role in ("bos", "eos", "pad", "unk"):
        target_id = getattr(target, f"{role}_token_id")
        assert overlap.target_to_source[target_id] == getattr(smollm2_tokenizer, f"{role}_token_id")
    assert set(overlap.special_roles) == {"bos", "eos", "pad", "unk"}


def _shared_forms(source, target) -> set[CanonicalToken]:
    forms = canonical_tokens(target)
    overlap = token_overlap(source, target)
    return {forms[t] for t in overlap.target_to_source if not forms[t].special}


@pytest.mark.parametrize("pair", [("spm-bpe", "wordpiece"), ("spm-unigram", "bytelevel-bpe")])
def test_overlap_is_symmetric(smollm2_tokenizer, trained, pair):
    first, second = trained[pair[0]], trained[pair[1]]
    assert _shared_forms(first, second) == _shared_forms(second, first)
    assert _shared_forms(smollm2_tokenizer, first) == _shared_forms(first, smollm2_tokenizer)


def test_gemma_overlap_counts_spelling_variants(smollm2_tokenizer, gemma3_tokenizer):
    overlap = token_overlap(smollm2_tokenizer, gemma3_tokenizer)
    for target_piece, source_piece in {"▁café": "ĠcafÃ©", "<0xC3>": "Ã", "▁hello": "Ġhello"}.items():
        target_id = gemma3_tokenizer.convert_tokens_to_ids(target_piece)
        assert overlap.target_to_source[target_id] == smollm2_tokenizer.convert_tokens_to_ids(source_piece)
    # Raw strings: about 15K shared; canonical forms: about 46K (nearly all of SmolLM2's 49,152).
    assert overlap.shared_by_raw_string < 20_000 < 40_000 < overlap.copied


def test_source_pieces_spell_each_target_token(smollm2_tokenizer, trained):
    """FVT: each target token's text (not its stored string), tokenized by the source, spells the token's bytes."""
    source_forms = canonical_tokens(smollm2_tokenizer)
    # SmolLM2 lacks 21 of the 256 byte tokens (control bytes, 0xC0, 0xC1, 0xF1..0xFF): those map onto unk.
    missing = set(range(256)) - set(byte_token_ids(smollm2_tokenizer))
    for kind in ("spm-bpe", "spm-unigram", "bytelevel-bpe"):
        target = trained[kind]
        forms = canonical_tokens(target)
        ids = [i for i, form in enumerate(forms) if form is not None and not form.special]
        for target_id, pieces in zip(ids, source_pieces(target, ids, smollm2_tokenizer)):
            assert pieces, f"{kind} token {target_id} has no pieces"
            if missing & set(forms[target_id].data):
                assert pieces == [smollm2_tokenizer.unk_token_id]
            else:
                assert b"".join(source_forms[p].text_bytes for p in pieces) == forms[target_id].text_bytes


def test_source_pieces_into_sentencepiece_keep_partial_bytes(smollm2_tokenizer, trained):
    """Byte-level tokens holding half a character map onto <0xNN> byte pieces of a sentencepiece source."""
    source = trained["spm-bpe"]
    source_forms = canonical_tokens(source)
    ids = [smollm2_tokenizer.convert_tokens_to_ids(piece) for piece in ("Ã", "ĠcafÃ©", "Ġ", "ĠÃ", "Ã¨")]
    pieces = source_pieces(smollm2_tokenizer, ids, source)
    assert pieces[0] == [source.convert_tokens_to_ids("<0xC3>")]
    for token_id, token_pieces in zip(ids, pieces):
        expected = canonical_tokens(smollm2_tokenizer)[token_id].text_bytes
        assert b"".join(source_forms[p].text_bytes for p in token_pieces) == expected


def test_source_pieces_ignore_a_prepended_dummy_space(trained):
    """A Llama-2-style source prepends '▁' to its input; a continuation piece must not get one."""
    source = trained["spm-bpe"]
    data = json.loads(source.backend_tokenizer.to_str())
    data["normalizer"] = {
        "type": "Sequence",
        "normalizers": [{"type": "Prepend", "prepend": "▁"}, data["normalizer"]],
    }
    llama2_style = Tokenizer.from_str(json.dumps(data))
    assert llama2_style.encode("eno").tokens[0].startswith("▁")  # the trap is real
    target = trained["bytelevel-bpe"]
    forms = canonical_tokens(target)
    continuation = next(i for i, form in enumerate(forms) if form and not form.word_start and len(form.data) > 2)
    [pieces] = source_pieces(target, [continuation], llama2_style)
    source_forms = canonical_tokens(llama2_style)
    assert b"".join(source_forms[p].text_bytes for p in pieces) == forms[continuation].data


def test_source_pieces_special_by_role_and_bad_ids(smollm2_tokenizer, trained):
    target = trained["spm-bpe"]
    [eos_pieces] = source_pieces(target, [target.eos_token_id], smollm2_tokenizer)
    assert eos_pieces == [smollm2_tokenizer.eos_token_id]
    with pytest.raises(ValueError, match="not a token of the target"):
        source_pieces(target, [len(target) + 5], smollm2_tokenizer)


def test_gemma_pieces_into_smollm2(smollm2_tokenizer, gemma3_tokenizer):
    forms = canonical_tokens(gemma3_tokenizer)
    source_forms = canonical_tokens(smollm2_tokenizer)
    missing = set(range(256)) - set(byte_token_ids(smollm2_tokenizer))
    ids = [i for i in range(0, len(forms), 97) if forms[i] and not forms[i].special and not missing & set(forms[i].data)]
    for target_id, pieces in zip(ids, source_pieces(gemma3_tokenizer, ids, smollm2_tokenizer)):
        assert b"".join(source_forms[p].text_bytes for p in pieces) == forms[target_id].text_bytes


def test_canonical_index_prefers_regular_pieces(gemma3_tokenizer):
    index = canonical_index(gemma3_tokenizer)
    assert index[CanonicalToken(b"A", False)] == gemma3_tokenizer.convert_tokens_to_ids("A")
    assert byte_token_ids(gemma3_tokenizer)[0x41] == gemma3_tokenizer.convert_tokens_to_ids("<0x41>")


PIECES = st.lists(st.text(st.sampled_from(list("abcèé😀 ")), min_size=1, max_size=4), min_size=1, max_size=30)


def _tokenizer_with(pieces: list[str], spelling: str) -> Tokenizer:
    """A WordLevel tokenizer whose vocabulary is ``pieces`` spelled byte-level ('Ġ') or sentencepiece ('▁')."""
    from vocadapt.components.tokenizers._backend import bytes_to_unicode

    alphabet = bytes_to_unicode()
    if spelling == "bytelevel":
        spelled = ["".join(alphabet[b] for b in piece.encode()) for piece in pieces]
        pre_tokenizer = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    else:
        spelled = [piece.replace(" ", "▁") for piece in pieces]
        pre_tokenizer = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": True}
    vocab = {piece: i for i, piece in enumerate(dict.fromkeys(["<unk>", *spelled]))}
    return Tokenizer.from_str(json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": pre_tokenizer, "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"},
    }))  # fmt: skip


@settings(max_examples=30, deadline=None)
@given(first=PIECES, second=PIECES)
def test_overlap_symmetry_and_spelling_independence(first, second):
    """Shared forms are the same both ways, and the same whichever way each side spells its tokens."""
    a, b = _tokenizer_with(first, "bytelevel"), _tokenizer_with(second, "metaspace")
    shared_ab, shared_ba = _shared_forms(a, b), _shared_forms(b, a)
    assert shared_ab == shared_ba
    forms_a = {CanonicalToken(p.encode(), False) for p in ["<unk>", *first]}
    forms_b = {CanonicalToken(p.encode(), False) for p in ["<unk>", *second]}
    assert {CanonicalToken(f.text_bytes, False) for f in shared_ab} == forms_a & forms_b
