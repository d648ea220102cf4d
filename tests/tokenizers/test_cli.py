"""``vocadapt tokenizer train|overlap|expand``, ``vocadapt fertility`` and ``vocadapt params`` end to end."""

from __future__ import annotations

import json

import pytest
from transformers import AutoTokenizer, LlamaConfig, MistralConfig
from typer.testing import CliRunner

from vocadapt.components.tokenizers.params import count_parameters, vocabulary_change
from vocadapt.cli.app import app

runner = CliRunner()

# The shapes of the two models in SAVA's Table 1 (from their published config.json files).
LLAMA_31_8B = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                   num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=False)  # fmt: skip
MISTRAL_7B = dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                  num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=False)  # fmt: skip


def invoke(*args: str):
    result = runner.invoke(app, [str(arg) for arg in args])
    return result


def test_params_match_sava_table_1():
    llama = vocabulary_change(LlamaConfig(**LLAMA_31_8B), 32768)
    assert round(llama["before"]["total"] / 1e9, 2) == 8.03
    assert round(llama["after"]["total"] / 1e9, 2) == 7.25
    mistral = vocabulary_change(MistralConfig(**MISTRAL_7B), 32768)
    assert (round(mistral["before"]["total"] / 1e9, 2), round(mistral["after"]["total"] / 1e9, 2)) == (7.24, 7.25)
    assert llama["after"]["body"] == llama["before"]["body"]  # only embeddings and head change


def test_params_tied_counts_the_matrix_once():
    tiny = LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)  # fmt: skip
    tied = count_parameters(tiny, 500)
    untied = count_parameters(LlamaConfig(**{**tiny.to_dict(), "tie_word_embeddings": False}), 500)
    assert tied.tied and tied.lm_head == 0 and tied.embeddings == 500 * 32
    assert untied.total - tied.total == 500 * 32


def test_params_of_a_smaller_vocabulary_with_the_pad_token_near_the_end():
    """Qwen3 pads with <|endoftext|> at 151,643: counting a trimmed or replaced vocabulary of fewer rows must not
    build an embedding whose padding index lies outside it."""
    from transformers import Qwen3Config

    qwen = Qwen3Config(vocab_size=1000, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                       num_attention_heads=2, num_key_value_heads=1, head_dim=8, pad_token_id=990)
    change = vocabulary_change(qwen, 300)
    assert change["before"]["embeddings"] == 1000 * 16 and change["after"]["embeddings"] == 300 * 16
    assert qwen.pad_token_id == 990  # the caller's config is left as it was


def test_params_command(tmp_path):
    config = tmp_path / "config.json"
    LlamaConfig(**LLAMA_31_8B).to_json_file(config)
    result = invoke("params", "--config", config, "--vocab-size", 32768, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["after"]["total"] == 7_248_023_552
    missing = invoke("params", "--config", tmp_path / "nope.json", "--vocab-size", 10)
    assert missing.exit_code == 2 and "no model config" in missing.output


def test_train_overlap_expand_fertility(smollm2_tokenizer, italian_train, fixture_corpora, tmp_path):
    source = tmp_path / "smollm2"
    smollm2_tokenizer.save_pretrained(source)
    trained = tmp_path / "it-tokenizer"
    result = invoke("tokenizer", "train", "--corpus", italian_train, "--kind", "bytelevel-bpe", "--vocab-size", 800,
                    "--out", trained, "--like", source)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert len(AutoTokenizer.from_pretrained(trained)) == 800

    result = invoke("tokenizer", "overlap", "--source", source, "--target", trained, "--json")
    assert result.exit_code == 0, result.output
    overlap = json.loads(result.output)
    assert overlap["copied"] + overlap["to_initialise"] == 800

    expanded = tmp_path / "expanded"
    result = invoke("tokenizer", "expand", "--source", source, "--target", trained, "--top-k", 50, "--corpus",
                    italian_train, "--protect", fixture_corpora["en.train"], "--out", expanded, "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert (summary["new_tokens"], summary["unreachable"]) == (50, 0)

    result = invoke("fertility", "--tokenizer", source, "--tokenizer", expanded, "--corpus",
                    fixture_corpora["it.validation"], "--reference", fixture_corpora["en.validation"],
                    "--new-from", source, "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    reports = json.loads(result.output)
    assert reports[str(expanded)]["tokens_per_word"] < reports[str(source)]["tokens_per_word"]
    assert reports[str(source)]["new_token_share"] == 0.0 < reports[str(expanded)]["new_token_share"]


@pytest.mark.parametrize(
    "args, message",
    [
        (("tokenizer", "train", "--kind", "bpe", "--vocab-size", 500, "--out", "{tmp}/x", "--corpus", "{corpus}"),
         "unknown tokenizer kind"),
        (("tokenizer", "train", "--kind", "spm-bpe", "--vocab-size", 500, "--out", "{tmp}/x"), "exactly one"),
        (("tokenizer", "overlap", "--source", "{tmp}/missing", "--target", "{tmp}/missing"), "not found"),
        (("fertility", "--tokenizer", "{tmp}/missing", "--corpus", "{corpus}"), "not found"),
    ],
)
def test_bad_input_exits_2_with_the_fix(tmp_path, italian_train, args, message):
    filled = [str(arg).format(tmp=tmp_path, corpus=italian_train) for arg in args]
    result = invoke(*filled)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "x").exists()
