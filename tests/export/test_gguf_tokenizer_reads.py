"""What the GGUF export reads of a tokenizer before and after llama.cpp's converter: tokenizer.json parsed once for
the pre-tokenizer's llama.cpp name, and only the normalizer serialised for the probe texts' Unicode form. Tiny
tokenizers built here; the families' real ones go through the whole export in test_gguf_families.py."""

from __future__ import annotations

import json

import pytest


def _tokenizer(normalizer=None, model: str = "bpe"):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocabulary = {"<unk>": 0, "a": 1, "b": 2, "ab": 3}
    backend = Tokenizer(models.BPE(vocabulary, [("a", "b")], unk_token="<unk>") if model == "bpe"
                        else models.WordLevel(vocabulary, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.normalizer = normalizer
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>")


def _whole_json_types(tokenizer) -> set[str]:
    """The normalizer types read from the whole tokenizer serialised (what the export read before)."""
    from vocadapt.components.export.gguf import normalizer_node_types

    return normalizer_node_types(json.loads(tokenizer.backend_tokenizer.to_str()).get("normalizer"))


@pytest.mark.parametrize("which", ["none", "nfc", "sequence"])
def test_normalizer_types_read_from_the_normalizer_alone(which):
    from tokenizers import normalizers

    from vocadapt.components.export.gguf import _normalizer_types

    normalizer = {"none": None, "nfc": normalizers.NFC(),
                  "sequence": normalizers.Sequence([normalizers.Lowercase(), normalizers.NFC()])}[which]
    tokenizer = _tokenizer(normalizer)
    assert _normalizer_types(tokenizer) == _whole_json_types(tokenizer)
    assert _normalizer_types(tokenizer) == {"none": set(), "nfc": {"NFC"},
                                            "sequence": {"Sequence", "Lowercase", "NFC"}}[which]


def test_the_pre_tokenizer_name_parses_tokenizer_json_once(tmp_path, monkeypatch):
    from vocadapt.components.export import gguf

    _tokenizer().save_pretrained(tmp_path / "bpe")
    _tokenizer(model="wordlevel").save_pretrained(tmp_path / "wordlevel")
    reads = []
    read = gguf._read_tokenizer_json
    monkeypatch.setattr(gguf, "_read_tokenizer_json", lambda folder: reads.append(folder) or read(folder))
    fingerprint, settings = gguf.pre_tokenizer_fingerprint(tmp_path / "bpe")
    assert settings["pre_tokenizer"]["type"] == "ByteLevel"
    monkeypatch.setitem(gguf.KNOWN_PRE_TOKENIZERS, fingerprint, "tiny-test")  # restored after the test
    reads.clear()
    assert gguf._known_pre_tokenizer(tmp_path / "bpe") == "tiny-test"
    assert len(reads) == 1
    assert gguf._known_pre_tokenizer(tmp_path / "wordlevel") is None  # not BPE: the converter's own choice
    assert gguf._known_pre_tokenizer(tmp_path) is None  # no tokenizer.json
