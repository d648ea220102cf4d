"""Helpers shared by the training and metrics tests: a tiny byte-level BPE tokenizer and a 2-layer Llama."""

from __future__ import annotations

ITALIAN = [
    "Il gatto dorme sul divano mentre piove forte sulla città.",
    "La biblioteca comunale apre alle nove e chiude alle diciotto.",
    "Questa pagina della guida spiega come inserire una tabella nel documento.",
    "Per salvare il file, scegliere Salva con nome dal menu File.",
    "Le montagne sono coperte di neve durante tutto l'inverno.",
    "Il treno per Milano parte dal binario tre tra dieci minuti.",
    "Nel mezzo del cammin di nostra vita mi ritrovai per una selva oscura.",
    "La funzione restituisce la somma dei valori selezionati nella colonna.",
]
ENGLISH = [
    "The cat sleeps on the sofa while it rains hard over the city.",
    "The public library opens at nine and closes at six.",
    "This help page explains how to insert a table into the document.",
    "To save the file, choose Save As from the File menu.",
    "The mountains are covered in snow all winter long.",
    "The train to Milan leaves from platform three in ten minutes.",
    "In the beginning God created the heaven and the earth.",
    "The function returns the sum of the selected values in the column.",
]


def make_tokenizer(vocab_size: int = 300, texts: list[str] | None = None):
    """A byte-level BPE trained here, wrapped as a transformers fast tokenizer with <|endoftext|> as bos/eos/pad."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator((texts or ITALIAN + ENGLISH) * 4, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<|endoftext|>", eos_token="<|endoftext|>", pad_token="<|endoftext|>"
    )


def make_model(vocab_size: int, *, seed: int = 0, layers: int = 2, tie: bool = True):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=tie,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )
    return LlamaForCausalLM(config)
