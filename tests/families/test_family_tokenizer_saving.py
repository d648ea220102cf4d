"""``save_tokenizer`` writes a folder that loads to the tokenizer it was saved from, without the legacy parse of
tokenizer.json in Python (transformers 5 reads the added tokens from the whole file when tokenizer_config.json has no
``added_tokens_decoder``), and with Mistral's ``legacy`` setting, which ``save_pretrained`` drops. On real family tokenizers: Llama-3.1 (loaded as
``TokenizersBackend``, which hands the file to Rust), Qwen3 (``Qwen2Tokenizer``, whose own ``__init__`` needs the
vocabulary parsed once in Python) and Mistral-7B-v0.1 (SentencePiece, converted)."""

from __future__ import annotations

import json

import pytest

from vocadapt.components.tokenizers.saving import save_tokenizer


def _loaded(folder, monkeypatch):
    """(the tokenizer loaded from ``folder``, how many times ``json.load`` read a tokenizer.json meanwhile)."""
    from transformers import AutoTokenizer

    real_load, parses = json.load, []

    def counting_load(handle, *args, **kwargs):
        if str(getattr(handle, "name", "")).endswith("tokenizer.json"):
            parses.append(handle.name)
        return real_load(handle, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(json, "load", counting_load)
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
    return tokenizer, len(parses)


def _described(tokenizer) -> dict:
    return {"class": type(tokenizer).__name__, "backend": tokenizer.backend_tokenizer.to_str(),
            "added": {token_id: token.__getstate__() for token_id, token in tokenizer.added_tokens_decoder.items()},
            "specials": tokenizer.special_tokens_map, "chat_template": tokenizer.chat_template,
            "ids": tokenizer(["Il gatto <s> dorme.\n", "<s>Ciao</s>Buongiorno", "</s>[INST] Ciao [/INST]"])["input_ids"]}


@pytest.mark.parametrize("name", ["llama3_1", "qwen3", "mistral_v1"])
def test_saved_tokenizer_loads_the_same_with_one_python_parse_fewer(name, load_family_tokenizer, tmp_path,
                                                                   monkeypatch):
    source = load_family_tokenizer(name)
    source.save_pretrained(str(tmp_path / "plain"))
    save_tokenizer(source, tmp_path / "saved")

    settings = json.loads((tmp_path / "saved" / "tokenizer_config.json").read_text(encoding="utf-8"))
    in_file = json.loads((tmp_path / "saved" / "tokenizer.json").read_text(encoding="utf-8"))["added_tokens"]
    assert settings["added_tokens_decoder"] == {str(entry.pop("id")): entry for entry in in_file}

    plain, plain_parses = _loaded(tmp_path / "plain", monkeypatch)
    saved, saved_parses = _loaded(tmp_path / "saved", monkeypatch)
    assert _described(saved) == _described(source)  # text after a special token too (Mistral's "legacy")
    assert saved_parses == plain_parses - 1, (plain_parses, saved_parses)


@pytest.mark.parametrize("name", ["qwen3", "mistral_v1"])
def test_a_load_with_the_collector_paused_gives_the_same_tokenizer(name, family_tokenizers):
    """``load_pretrained_tokenizer`` (the collector paused: components/collector.py) on a class that builds its
    vocabulary in Python (Qwen2Tokenizer) and on a converted SentencePiece one (Mistral's): the tokenizer
    ``AutoTokenizer.from_pretrained`` gives, and the collector back on afterwards."""
    import gc

    from transformers import AutoTokenizer

    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

    folder = family_tokenizers[name]
    paused = load_pretrained_tokenizer(folder)
    assert gc.isenabled()
    assert _described(paused) == _described(AutoTokenizer.from_pretrained(str(folder)))
