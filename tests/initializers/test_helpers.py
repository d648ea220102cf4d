"""Helpers: fastText on the target-tokenized corpus (deterministic), static .vec files, a helper model's embeddings."""

from __future__ import annotations

import copy
import platform

import pytest
import torch

from tests.initializers.tiny_world import tiny_llama
from vocadapt.components.helpers import resolve_helper
from vocadapt.components.helpers.fasttext_helper import token_words


def test_fasttext_helper_is_deterministic_and_covers_the_target_vocabulary(target_tokenizer, corpus_file, fasttext_helper):
    again = resolve_helper("fasttext:dim=16,epoch=2", target_tokenizer=target_tokenizer, corpus_files=[corpus_file])
    assert torch.equal(again.vectors, fasttext_helper.vectors)
    assert fasttext_helper.vectors.shape == (len(target_tokenizer), 16)
    with open(corpus_file, encoding="utf-8") as handle:
        seen = {token_id for line in handle for token_id in target_tokenizer(line.strip())["input_ids"]}
    assert fasttext_helper.known[sorted(seen)].all()  # every token of the corpus has a vector
    assert int(fasttext_helper.known.sum()) > len(seen)  # and unseen tokens get one from their n-grams
    other = resolve_helper("fasttext:dim=16,epoch=2", target_tokenizer=target_tokenizer, corpus_files=[corpus_file], seed=1)
    assert not torch.equal(other.vectors, fasttext_helper.vectors)


def _freed_blocks_filled_with(byte: int) -> None:
    """Leave freed heap blocks holding ``byte`` (glibc malloc), where a later allocation of the same sizes lands."""
    import ctypes

    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = []
    for size in (4096, 32768, 65536, 100_000):
        for _ in range(100):
            block = libc.malloc(size)
            ctypes.memset(block, byte, size)
            blocks.append(block)
    for block in blocks:
        libc.free(block)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="fills glibc's freed heap blocks")
def test_fasttext_trains_the_same_whatever_memory_it_is_given(tmp_path, target_tokenizer, corpus_file):
    """fastText with one thread leaves nine tenths of its input matrix as allocated; with a small matrix (from the
    heap, not fresh pages) the result followed what freed memory held, or stopped with "Encountered NaN."
    (``zero_filled_allocations``). Both trainings below start from freed blocks of other contents."""
    from vocadapt.components.helpers.fasttext_helper import train_seeded_fasttext, write_token_corpus

    corpus = tmp_path / "tokens.txt"
    write_token_corpus(target_tokenizer, [corpus_file], corpus, max_lines=10_000)
    vectors = []
    for byte in (0x3F, 0x7F):
        _freed_blocks_filled_with(byte)
        model = train_seeded_fasttext(str(corpus), seed=0, dim=8, epoch=1, minCount=1, bucket=1000)
        vectors.append(torch.from_numpy(model.get_input_matrix()))
    assert torch.isfinite(vectors[0]).all() and vectors[0].abs().max() < 10
    assert torch.equal(vectors[0], vectors[1])


def test_vectors_file_round_trip(tmp_path, target_tokenizer, fasttext_helper):
    words = token_words(target_tokenizer)
    chosen = [token_id for token_id in range(len(words)) if words[token_id]][:40]
    lines = [f"{len(chosen)} 16"] + [
        words[token_id] + " " + " ".join(f"{value:.6f}" for value in fasttext_helper.vectors[token_id].tolist())
        for token_id in chosen
    ]
    path = tmp_path / "helper.vec"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    helper = resolve_helper(f"vectors:{path}", target_tokenizer=target_tokenizer)
    assert helper.kind == "vectors" and int(helper.known.sum()) == 40
    assert torch.allclose(helper.vectors[chosen], fasttext_helper.vectors[chosen], atol=1e-5)
    assert resolve_helper(str(path), target_tokenizer=target_tokenizer).kind == "vectors"


def test_model_helper_reads_input_embeddings_and_checks_the_tokenizer(tmp_path, target_tokenizer, source_tokenizer):
    model = tiny_llama(len(target_tokenizer), tied=True)
    model.save_pretrained(tmp_path / "helper")
    target_tokenizer.save_pretrained(tmp_path / "helper")
    helper = resolve_helper(f"model:{tmp_path / 'helper'}", target_tokenizer=target_tokenizer)
    assert helper.kind == "model" and torch.equal(helper.vectors, model.get_input_embeddings().weight.detach())
    source_tokenizer.save_pretrained(tmp_path / "wrong")
    model.save_pretrained(tmp_path / "wrong")
    with pytest.raises(ValueError, match="different tokenizer"):
        resolve_helper(f"model:{tmp_path / 'wrong'}", target_tokenizer=target_tokenizer)


def test_model_helper_accepts_the_target_tokenizer_with_the_source_special_tokens_appended(
        tmp_path, target_tokenizer, source_tokenizer):
    """SAVA's setting: the helper's own tokenizer is the target tokenizer (tokenizer.pretrained), and
    replace_vocabulary appends the source model's special tokens; they get no helper vector, the rest keep theirs."""
    from vocadapt.components.tokenizers.replace import replace_vocabulary

    model = tiny_llama(len(target_tokenizer), tied=True)
    model.save_pretrained(tmp_path / "helper")
    target_tokenizer.save_pretrained(tmp_path / "helper")
    source = copy.deepcopy(source_tokenizer)
    source.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})  # a chat model's
    replaced = replace_vocabulary(source, target_tokenizer).tokenizer
    appended = sorted(set(replaced.get_vocab().values()) - set(target_tokenizer.get_vocab().values()))
    assert appended  # the case this test is about
    helper = resolve_helper(f"model:{tmp_path / 'helper'}", target_tokenizer=replaced)
    own = sorted(target_tokenizer.get_vocab().values())
    assert helper.known[own].all() and not helper.known[appended].any()
    assert torch.equal(helper.vectors[own], model.get_input_embeddings().weight.detach()[own])


@pytest.mark.parametrize("spec,message", [
    ("fasttext:dim", "not name=value"),
    ("fasttext:size=3", "no option"),
    ("model:/nonexistent/helper", "does not exist"),
])
def test_bad_helper_specs_say_how_to_fix_them(spec, message, target_tokenizer, corpus_file):
    with pytest.raises(ValueError, match=message):
        resolve_helper(spec, target_tokenizer=target_tokenizer, corpus_files=[corpus_file])


def test_no_helper_and_no_corpus(target_tokenizer):
    assert resolve_helper(None, target_tokenizer=target_tokenizer) is None
    assert resolve_helper("none", target_tokenizer=target_tokenizer) is None
    with pytest.raises(ValueError, match="no corpus files"):
        resolve_helper("fasttext", target_tokenizer=target_tokenizer)
