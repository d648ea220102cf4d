"""Tiny world for the initialiser tests (imported by conftest and the tests): two byte-level BPE tokenizers (English source, Italian target), a
sentencepiece-style (Metaspace, byte fallback) target, tiny Llama models (hidden 32, 2 layers), a small corpus."""

from __future__ import annotations

import random

import torch

ENGLISH = [
    "the cat sat on the mat and the dog ran to the house",
    "a small model learns the language of the city quickly",
    "we read books in the morning and write letters at night",
    "the weather is good today so we walk along the river",
    "people eat bread and drink coffee in the old cafe",
]
ITALIAN = [
    "il gatto dorme sulla sedia e il cane corre verso la casa",
    "la città è bella e la gente mangia il pane con il caffè",
    "oggi il tempo è buono quindi camminiamo lungo il fiume",
    "leggiamo libri la mattina e scriviamo lettere la sera",
    "il modello piccolo impara la lingua della città velocemente",
    "perché la nostra famiglia preferisce la cucina italiana",
]


def synthetic_lines(sentences: list[str], count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = " ".join(sentences).split()
    return [" ".join(rng.choice(sentences).split()[: rng.randint(4, 12)] + rng.sample(words, 3)) for _ in range(count)]


def bytelevel_tokenizer(lines: list[str], vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<|endoftext|>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    backend.train_from_iterator(lines, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<|endoftext|>", eos_token="<|endoftext|>", pad_token="<pad>"
    )


def metaspace_tokenizer(lines: list[str], vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Metaspace()
    backend.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace()])
    byte_pieces = [f"<0x{byte:02X}>" for byte in range(256)]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>", *byte_pieces], show_progress=False
    )
    backend.train_from_iterator(lines, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def tiny_llama(vocab_size: int, tied: bool, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, tie_word_embeddings=tied,
    )
    model = LlamaForCausalLM(config)
    if not tied:
        with torch.no_grad():
            model.lm_head.weight.normal_(0.0, 0.05)
    return model.eval()




def expand_bpe(source_tokenizer, target_tokenizer, max_new: int = 40):
    """A test-only BPE expansion: append target merges whose parts already exist, keeping every source id.

    (The tokenizer toolkit owns the real expansion; this builds a valid expanded tokenizer for surgery tests.)
    """
    import json

    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    source = json.loads(source_tokenizer.backend_tokenizer.to_str())
    target = json.loads(target_tokenizer.backend_tokenizer.to_str())
    vocab = source["model"]["vocab"]
    next_id = max([*vocab.values(), *(token["id"] for token in source["added_tokens"])]) + 1
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in source["model"]["merges"]]
    added = 0
    for merge in target["model"]["merges"]:
        left, right = merge if isinstance(merge, list) else merge.split(" ")
        if left in vocab and right in vocab and left + right not in vocab and added < max_new:
            vocab[left + right] = next_id
            merges.append((left, right))
            next_id += 1
            added += 1
    source["model"]["merges"] = [list(m) for m in merges]
    backend = Tokenizer.from_str(json.dumps(source))
    special = {key: getattr(source_tokenizer, key) for key in ("bos_token", "eos_token", "pad_token", "unk_token")
               if getattr(source_tokenizer, key, None)}
    return PreTrainedTokenizerFast(tokenizer_object=backend, **special)
