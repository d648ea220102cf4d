"""The model-folder check reads a tokenizer's ids once per content: the same tokenizer.json written to another folder
(an adapt writes it to the initialised checkpoint, LAPT's output and the registered version) is not parsed again and
is reported under its own path, while changed bytes are read afresh and still refused when an id means two tokens."""

from __future__ import annotations

import json
import shutil

import pytest

from vocadapt.components import model_folder_checks
from vocadapt.components.errors import UserError
from vocadapt.components.model_folder_checks import read_tokenizer_ids


def _tokenizer_folder(folder, added: list[dict]):
    folder.mkdir()
    vocab = {"<s>": 0, "a": 1, "b": 2, "ab": 3}
    (folder / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": vocab, "merges": ["a b"]},
                                                       "added_tokens": added}), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 8}), encoding="utf-8")
    return folder


def test_the_same_tokenizer_in_another_folder_is_not_parsed_again(tmp_path, monkeypatch):
    first = _tokenizer_folder(tmp_path / "first", [{"id": 4, "content": "<x>"}])
    ids = read_tokenizer_ids(first, "--source-model")
    assert (ids.count, ids.highest, ids.source) == (5, 4, str(first / "tokenizer.json"))

    copy = tmp_path / "copy"
    shutil.copytree(first, copy)
    # a file the check does not read where tokenizer.json exists: it does not make the content another
    (copy / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 16}), encoding="utf-8")
    parsed = []
    original = model_folder_checks._read_tokenizer_ids
    monkeypatch.setattr(model_folder_checks, "_read_tokenizer_ids",
                        lambda folder, what: parsed.append(folder) or original(folder, what))
    again = read_tokenizer_ids(copy, "--source-model")
    assert parsed == [] and (again.count, again.highest) == (5, 4)
    assert again.source == str(copy / "tokenizer.json")  # messages name the folder checked, not the first

    data = json.loads((copy / "tokenizer.json").read_text(encoding="utf-8"))
    data["added_tokens"].append({"id": 4, "content": "<y>"})  # changed bytes: read again, and refused
    (copy / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(UserError, match="share id 4"):
        read_tokenizer_ids(copy, "--source-model")
    assert parsed == [copy]
