"""``vocadapt params`` on every family's real config: the published parameter counts.

Each config.json is written from the catalogue's architecture numbers (``families.yaml``, copied from the hub's
config.json) by transformers' own config class, then counted by the command on the meta device. The figures asserted
are the published ones, to the rounding their source uses:

- SAVA Table 1 (``papers/sava-vocabulary-adaptation-italian.md``): Llama-3.1-8B 8.03 B with 128,256 tokens and
  7.25 B adapted with Minerva's 32,768-token vocabulary; Mistral-7B-v0.1 7.24 B with 32,000 and 7.25 B with 32,768;
- Qwen3-8B's card: 8.2 B, 6.95 B of them non-embedding (8.19 B to two decimals);
- Llama-2-7b: 6.74 B (the size the hub shows for its safetensors);
- Gemma-3 4B: 3.88 B in its text model (the rest of the 4.3 B is the vision tower, which a vocabulary change does
  not touch);
- DeepSeek-V3's card: 671 B in the main model (its 685 B checkpoint adds a 14 B multi-token-prediction module,
  which transformers' DeepseekV3ForCausalLM does not build).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tests.families.conftest import FAMILIES
from vocadapt.cli.app import app
from vocadapt.platform.families.catalogue import model_family

SAVA_TARGET_VOCABULARY = 32_768  # Minerva-LLMs' tokenizer, SAVA Table 1

# family -> (published total, its rounding as a number of decimals of billions)
PUBLISHED_TOTALS = {
    "llama3_1": (8.03, 2),
    "llama2": (6.74, 2),
    "mistral_v1": (7.24, 2),
    "qwen3": (8.19, 2),
    "gemma3": (3.88, 2),
    "deepseek_v3": (671, 0),
}
# SAVA Table 1: the same models after replacing the vocabulary with Minerva's 32,768 tokens
PUBLISHED_AFTER_SAVA = {"llama3_1": 7.25, "mistral_v1": 7.25}


def family_config_file(name: str, folder) -> str:
    """The family's config.json, written by transformers' config class from the catalogue's numbers."""
    from transformers import AutoConfig

    architecture = dict(model_family(name).architecture)
    model_type = architecture.pop("model_type")
    architecture.pop("class")
    path = folder / f"{name}-config.json"
    AutoConfig.for_model(model_type, **architecture).to_json_file(str(path))
    return str(path)


def params(config_file: str, vocab_size: int) -> dict:
    result = CliRunner().invoke(app, ["params", "--config", config_file, "--vocab-size", str(vocab_size), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_every_family_is_in_the_published_table():
    assert set(PUBLISHED_TOTALS) == set(FAMILIES)


@pytest.mark.parametrize("name", FAMILIES)
def test_real_config_counts_the_published_total(name, tmp_path):
    family = model_family(name)
    config_file = family_config_file(name, tmp_path)
    change = params(config_file, SAVA_TARGET_VOCABULARY)
    before, after = change["before"], change["after"]
    published, decimals = PUBLISHED_TOTALS[name]
    assert round(before["total"] / 1e9, decimals) == published, before
    assert before["vocab_size"] == family.vocab_rows and before["hidden_size"] == family.architecture["hidden_size"]
    assert before["tied"] == family.tied and (before["lm_head"] == 0) == family.tied
    assert before["embeddings"] == family.vocab_rows * family.architecture["hidden_size"]
    # only the embeddings and the head change with the vocabulary
    assert after["body"] == before["body"]
    matrices = 1 if family.tied else 2
    expected_change = (SAVA_TARGET_VOCABULARY - family.vocab_rows) * family.architecture["hidden_size"] * matrices
    assert change["change"] == after["total"] - before["total"] == expected_change
    if name in PUBLISHED_AFTER_SAVA:
        assert round(after["total"] / 1e9, 2) == PUBLISHED_AFTER_SAVA[name], after


def test_qwen3_non_embedding_count_is_the_cards(tmp_path):
    """Qwen3-8B's card gives 6.95 B non-embedding parameters: the body without the input embeddings and the head."""
    before = params(family_config_file("qwen3", tmp_path), 151_936)["before"]
    assert round(before["body"] / 1e9, 2) == 6.95


def test_printed_table_shows_sava_table_1(tmp_path):
    result = CliRunner().invoke(app, ["params", "--config", family_config_file("llama3_1", tmp_path),
                                      "--vocab-size", str(SAVA_TARGET_VOCABULARY)])
    assert result.exit_code == 0, result.output
    assert "before: vocabulary 128,256  total 8.03B" in result.output
    assert "after: vocabulary 32,768  total 7.25B" in result.output
