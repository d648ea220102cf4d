"""The real embedded default (built once per machine by the `embedded_assets` fixture)."""

from __future__ import annotations

import hashlib
import json

import pytest

from vocadapt.components.corpora import split_of
from vocadapt.platform.assets.embedded import load_assets


@pytest.fixture(scope="module")
def source_model(embedded_assets):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(embedded_assets.model_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(embedded_assets.model_dir, local_files_only=True)
    return model.eval(), tokenizer


def test_model_still_knows_paris(source_model):
    import torch

    model, tokenizer = source_model
    inputs = tokenizer("The capital of France is", return_tensors="pt")
    with torch.no_grad():
        output = model.generate(**inputs, max_new_tokens=6, do_sample=False)
    assert "Paris" in tokenizer.decode(output[0, inputs["input_ids"].shape[1]:])


def test_tokenizer_special_tokens_no_bos_and_chat_template(source_model, embedded_assets):
    model, tokenizer = source_model
    assert tokenizer("Ciao")["input_ids"][0] != tokenizer.bos_token_id  # add_bos is off, as SmolLM2 was trained
    specials = (tokenizer.bos_token, tokenizer.eos_token, tokenizer.unk_token)
    assert specials == ("<|im_start|>", "<|im_end|>", "<|endoftext|>")
    assert model.config.vocab_size == 49152 and model.config.tie_word_embeddings
    assert model.config.eos_token_id == tokenizer.eos_token_id
    chat = [{"role": "user", "content": "Ciao"}]
    prompt = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>user\nCiao<|im_end|>\n<|im_start|>assistant\n")
    saved = json.loads((embedded_assets.model_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert saved["add_bos_token"] is False and "local_files_only" not in saved
    assert not any(embedded_assets.model_dir.glob("*.bin"))  # safetensors only


def test_manifest_sha256_sums_match_every_file(embedded_assets):
    manifest = embedded_assets.manifest
    assert embedded_assets.verify() == []
    folders = [manifest["model"]["dir"], *(f for entry in manifest["corpora"].values() for f in entry["folders"])]
    on_disk = {
        path.relative_to(embedded_assets.home).as_posix()
        for folder in folders
        for path in (embedded_assets.home / folder).rglob("*")
        if path.is_file()
    }
    # single files beside the folders: word lists, WECHSEL's word vectors and bilingual dictionaries
    singles = {entry["file"] for kind in ("lexicons", "word_vectors", "dictionaries")
               for entry in manifest.get(kind, {}).values() if "file" in entry}
    assert on_disk | singles == set(manifest["files"])
    test_file = embedded_assets.corpus("it", "test")
    assert embedded_assets.sha256(test_file) == hashlib.sha256(test_file.read_bytes()).hexdigest()
    assert manifest["corpora"]["it"]["units"]["bible-diodati"] > 30_000
    assert manifest["sources"]["bible-diodati"]["licence"] == "public domain"
    # an instant second look: every entry the fixture read is there, unchanged. Entries may have been added since:
    # the manifest is shared by every process on the machine, and the other pytest worker builds word vectors and
    # dictionaries for German and Russian on demand (a fresh-clone run failed when it compared whole manifests)
    again = load_assets(embedded_assets.home).manifest
    for key, value in manifest.items():
        assert (({name: again[key].get(name) for name in value} if isinstance(value, dict) else again[key])
                == value), key


def test_corpora_splits_follow_the_key_and_do_not_leak(embedded_assets):
    lines = {
        split: embedded_assets.parallel("it", split).read_text(encoding="utf-8").splitlines()
        for split in ("train", "validation", "test")
    }
    test_records = [json.loads(line) for line in lines["test"]]
    assert all(split_of(record["key"]) == "test" for record in test_records[:500])
    train_italian = set(embedded_assets.corpus("it", "train").read_text(encoding="utf-8").splitlines())
    test_italian = embedded_assets.corpus("it", "test").read_text(encoding="utf-8").splitlines()
    assert test_italian == [record["it"] for record in test_records]
    assert not train_italian & set(test_italian)
    assert len(test_italian) > 2_000 and len(train_italian) > 40_000


def test_english_word_list_from_debian(embedded_assets):
    """The word list vocabulary expansion protects: American and British spellings, one word per line."""
    lexicon = embedded_assets.lexicon("en")
    if lexicon is None:
        pytest.skip(f"no English word list: {embedded_assets.manifest['lexicons']['en']['missing']}")
    words = lexicon.read_text(encoding="utf-8").split("\n")
    assert len(words) > 150_000 and {"colour", "color", "Italy"} <= set(words)
    assert embedded_assets.sha256(lexicon) == embedded_assets.manifest["files"]["lexicons/en.txt"]["sha256"]
