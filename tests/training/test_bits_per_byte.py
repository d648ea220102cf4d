import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.training.lapt_tiny_world import ENGLISH, ITALIAN, make_tokenizer
from vocadapt.components.metrics import bits_per_byte, score_bits_per_byte


class UniformModel(torch.nn.Module):
    """Gives every token of the vocabulary the same probability: NLL is ln V per target."""

    def __init__(self, vocab_size: int):
        super().__init__()
        self.vocab_size = vocab_size
        self.anchor = torch.nn.Parameter(torch.zeros(()))

    def forward(self, input_ids, attention_mask=None):
        logits = torch.zeros(*input_ids.shape, self.vocab_size) + self.anchor

        class Output:
            pass

        out = Output()
        out.logits = logits
        return out


def _content_tokens(tokenizer, docs):
    return sum(len(tokenizer(d, add_special_tokens=False)["input_ids"]) for d in docs)


@pytest.mark.parametrize("vocab_size", [260, 400])
def test_uniform_model_gives_log2_vocab_times_tokens_per_byte(vocab_size):
    tokenizer = make_tokenizer(vocab_size)
    docs = ITALIAN + ENGLISH
    tokens = _content_tokens(tokenizer, docs)
    n_bytes = sum(len(d.encode("utf-8")) for d in docs)
    V = len(tokenizer)
    result = bits_per_byte(UniformModel(V), tokenizer, docs, max_length=16, batch_size=3)
    assert result == pytest.approx(math.log2(V) * tokens / n_bytes, rel=1e-6)


def test_two_tokenizers_are_scored_on_the_same_bytes():
    """A coarser tokenizer gets fewer tokens on the same text; bpb charges both for the same bytes."""
    byte_level = make_tokenizer(257)  # the 256 bytes and one special token: no merges
    merged = make_tokenizer(400)
    docs = ITALIAN
    coarse, fine = (score_bits_per_byte(UniformModel(len(t)), t, docs) for t in (merged, byte_level))
    assert coarse.bytes == fine.bytes == sum(len(d.encode()) for d in docs)
    assert fine.tokens == coarse.bytes  # byte-level: one token per byte
    assert coarse.tokens < fine.tokens
    # uniform over 257 symbols per byte is log2(257) bits per byte, whatever the text
    assert fine.bits_per_byte == pytest.approx(math.log2(len(byte_level)))
    # per-token loss says the models are equal-ish; bpb sees that the coarse one spends fewer bits on the text
    assert coarse.bits_per_byte < fine.bits_per_byte


def test_special_tokens_are_not_content(tokenizer, tiny_model):
    """A tokenizer that adds BOS by default scores exactly what one that does not scores."""
    docs = ITALIAN[:3]
    plain = score_bits_per_byte(tiny_model, tokenizer, docs)
    tokenizer_with_bos = make_tokenizer()
    tokenizer_with_bos._tokenizer.post_processor = __import__("tokenizers").processors.TemplateProcessing(
        single="<|endoftext|> $A <|endoftext|>", special_tokens=[("<|endoftext|>", 0)]
    )
    assert len(tokenizer_with_bos("ciao")["input_ids"]) == len(tokenizer("ciao")["input_ids"]) + 2
    adding = score_bits_per_byte(tiny_model, tokenizer_with_bos, docs)
    assert adding.tokens == plain.tokens
    assert adding.nats == pytest.approx(plain.nats, rel=1e-6)


def test_padding_is_masked_and_result_is_deterministic(tokenizer, tiny_model):
    docs = ITALIAN + ENGLISH
    one_by_one = bits_per_byte(tiny_model, tokenizer, docs, batch_size=1)
    batched = bits_per_byte(tiny_model, tokenizer, docs, batch_size=8)
    assert batched == pytest.approx(one_by_one, rel=1e-5)
    assert bits_per_byte(tiny_model, tokenizer, docs, batch_size=8) == batched
    assert tiny_model.training  # mode restored


@settings(max_examples=8, deadline=None)
@given(max_length=st.integers(1, 40), batch_size=st.integers(1, 5))
def test_windows_score_every_content_token_once(max_length, batch_size):
    tokenizer = make_tokenizer(300)
    docs = [ITALIAN[0] * 3, ENGLISH[1]]
    result = score_bits_per_byte(UniformModel(len(tokenizer)), tokenizer, docs, max_length=max_length,
                                 batch_size=batch_size)
    assert result.tokens == _content_tokens(tokenizer, docs)
    assert result.nats == pytest.approx(result.tokens * math.log(len(tokenizer)), rel=1e-5)


def test_bad_input_is_named(tokenizer, tiny_model):
    with pytest.raises(ValueError, match="no non-empty documents"):
        bits_per_byte(tiny_model, tokenizer, ["", ""])
    tokenizer_without = make_tokenizer()
    tokenizer_without.bos_token = None
    tokenizer_without.eos_token = None
    with pytest.raises(ValueError, match="neither a BOS nor an EOS"):
        bits_per_byte(tiny_model, tokenizer_without, ["ciao"])


def test_batches_go_longest_first_and_hold_every_index_once():
    from vocadapt.components.metrics.bits_per_byte import length_sorted_batches

    lengths = [3, 9, 1, 9, 5, 2, 7]
    batches = length_sorted_batches(lengths, 3)
    assert batches == [[1, 3, 6], [4, 0, 5], [2]]  # ties keep their order
    assert sorted(index for batch in batches for index in batch) == list(range(len(lengths)))
    assert length_sorted_batches([], 4) == []


class ShapeRecorder(torch.nn.Module):
    """The tiny model, recording the (batch, width) of every forward: the positions it computed, padding included."""

    def __init__(self, model):
        super().__init__()
        self.model, self.shapes = model, []

    def forward(self, input_ids, attention_mask=None):
        self.shapes.append(tuple(input_ids.shape))
        return self.model(input_ids=input_ids, attention_mask=attention_mask)


def test_documents_of_mixed_lengths_are_scored_with_less_padding_and_the_same_losses(tokenizer, tiny_model):
    """Short and long documents alternate (fortunes): batched by length, the forwards compute fewer padded positions,
    and each document's loss is the one it gets alone."""
    from vocadapt.components.metrics.bits_per_byte import score_documents

    docs = [ITALIAN[0] * 4 if index % 2 else word for index, word in enumerate(("Sì", "No", "Ciao", "Ecco"))]
    recorder = ShapeRecorder(tiny_model)
    batched = score_documents(recorder, tokenizer, docs, max_length=512, batch_size=2)  # a window a document
    computed = sum(rows * width for rows, width in recorder.shapes)
    in_order = 0
    for start in range(0, len(docs), 2):  # the same documents two at a time in their order, as before
        lengths = [len(tokenizer(doc, add_special_tokens=False)["input_ids"]) for doc in docs[start:start + 2]]
        in_order += 2 * max(lengths)
    assert computed < in_order
    for doc, scored in zip(docs, batched):
        (alone,) = score_documents(tiny_model, tokenizer, [doc], max_length=512, batch_size=1)
        assert scored.nats == pytest.approx(alone.nats, rel=1e-5) and scored.tokens == alone.tokens
