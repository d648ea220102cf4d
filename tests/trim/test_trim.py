"""Vocabulary trimming: the trimmed tokenizer and the trimmed checkpoint against their source.

A tiny Llama with a byte-level BPE and one with a sentencepiece-style BPE (byte fallback), both trained here on the
committed corpus slices, are trimmed to the Italian slice; the real Gemma-3 tokenizer is trimmed to Italian and
English. On kept text the ids are the source's (through ``target_to_source``) and the log-probabilities are the
source's renormalised over the kept tokens; other text still encodes and decodes back.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from vocadapt.components.errors import UserError
from vocadapt.components.tokenizers.trim import trim_tokenizer

CORPORA = Path(__file__).parents[1] / "fixtures" / "corpora"
DROPPED_TEXT = ["東京は日本の首都です。", "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich 😀",
                "The committee's quarterly report, 2026-11-26: 3.14159 > 2.71828!"]


MIN_COUNT = 3


def lines(name: str) -> list[str]:
    return (CORPORA / f"{name}.txt").read_text(encoding="utf-8").splitlines()


def build_model(folder: Path, kind: str) -> Path:
    """A random tiny Llama (hidden 32, untied head) and a ~400-token tokenizer of ``kind`` trained on the Italian and English slices."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, train_tokenizer

    files = [CORPORA / f"{name}.train.txt" for name in ("it", "en")]
    train_tokenizer(files, TokenizerTrainingSpec(kind, 420, min_frequency=2), folder)
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False)
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module", params=["bytelevel-bpe", "spm-bpe"])
def trimmed_world(request, tmp_path_factory):
    """(source folder, trimmed folder, its record) for a tiny model of each BPE kind trimmed to the Italian slice."""
    from vocadapt.components.surgery.trim import trim_checkpoint

    root = tmp_path_factory.mktemp(request.param)
    source = build_model(root / "source", request.param)
    # a threshold over 1 drops tokens the slice uses too, and with them pieces only other kept tokens are built from
    record = trim_checkpoint(source, lines("it.train"), root / "trimmed", min_count=MIN_COUNT)
    return source, root / "trimmed", record


def test_kept_text_keeps_its_tokens_and_renormalised_log_probabilities(trimmed_world):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source_dir, trimmed_dir, record = trimmed_world
    source_tok, trimmed_tok = (AutoTokenizer.from_pretrained(str(d)) for d in (source_dir, trimmed_dir))
    target_to_source = record_map(source_tok, trimmed_tok)
    assert record["mode"] == "trim" and record["initialised"] == 0
    assert len(trimmed_tok) == record["rows"] < len(source_tok)  # something was dropped, no padding rows
    kept = sorted(target_to_source.values())
    source_model, trimmed_model = (AutoModelForCausalLM.from_pretrained(str(d)).eval() for d in (source_dir, trimmed_dir))
    kept_lines = [text for text in lines("it.train")
                  if set(source_tok(text, add_special_tokens=False).input_ids) <= set(kept)]
    assert len(kept_lines) >= 20
    for text in kept_lines:
        source_ids = source_tok(text, add_special_tokens=False).input_ids
        trimmed_ids = trimmed_tok(text, add_special_tokens=False).input_ids
        assert [target_to_source[i] for i in trimmed_ids] == source_ids, text
    text = "\n".join(kept_lines[:8])
    source_ids = source_tok(text, return_tensors="pt").input_ids[:, :200]
    trimmed_ids = torch.tensor([[kept.index(i) for i in source_ids[0].tolist()]])
    with torch.no_grad():
        source_logits = source_model(source_ids).logits[0]
        trimmed_logits = trimmed_model(trimmed_ids).logits[0]
    expected = torch.log_softmax(source_logits[:, kept], dim=-1)
    torch.testing.assert_close(torch.log_softmax(trimmed_logits, dim=-1), expected, atol=1e-5, rtol=1e-5)


def record_map(source_tok, trimmed_tok) -> dict[int, int]:
    """Trimmed id -> source id, read from the two vocabularies (token strings are unique within each)."""
    source_vocab = source_tok.get_vocab()
    return {token_id: source_vocab[piece] for piece, token_id in trimmed_tok.get_vocab().items()}


def test_dropped_text_still_encodes_and_decodes_back(trimmed_world):
    from transformers import AutoTokenizer

    source_dir, trimmed_dir, _ = trimmed_world
    source_tok, trimmed_tok = (AutoTokenizer.from_pretrained(str(d)) for d in (source_dir, trimmed_dir))
    kept = set(record_map(source_tok, trimmed_tok).values())
    dropped_uses = 0
    for text in DROPPED_TEXT + lines("en.validation")[:20]:
        source_ids = source_tok(text, add_special_tokens=False).input_ids
        dropped_uses += sum(token_id not in kept for token_id in source_ids)
        trimmed_ids = trimmed_tok(text, add_special_tokens=False).input_ids
        assert trimmed_tok.unk_token_id is None or trimmed_tok.unk_token_id not in trimmed_ids or \
            source_tok.unk_token_id in source_ids
        assert trimmed_tok.decode(trimmed_ids) == source_tok.decode(source_ids), text
    assert dropped_uses > 0  # the text did need tokens the trim dropped


def test_special_tokens_keep_their_text_and_role(trimmed_world):
    from transformers import AutoTokenizer

    source_dir, trimmed_dir, _ = trimmed_world
    source_tok, trimmed_tok = (AutoTokenizer.from_pretrained(str(d)) for d in (source_dir, trimmed_dir))
    target_to_source = record_map(source_tok, trimmed_tok)
    config = json.loads((trimmed_dir / "config.json").read_text())
    for role in ("bos", "eos", "pad", "unk"):
        assert getattr(trimmed_tok, f"{role}_token") == getattr(source_tok, f"{role}_token")
        trimmed_id = getattr(trimmed_tok, f"{role}_token_id")
        if trimmed_id is not None:
            assert target_to_source[trimmed_id] == getattr(source_tok, f"{role}_token_id")
            assert trimmed_tok.convert_tokens_to_ids(getattr(trimmed_tok, f"{role}_token")) == trimmed_id
    assert config["eos_token_id"] == trimmed_tok.eos_token_id and config["vocab_size"] == len(trimmed_tok)
    text = f"{source_tok.eos_token}Ciao"
    assert [target_to_source[i] for i in trimmed_tok(text, add_special_tokens=False).input_ids] == \
        source_tok(text, add_special_tokens=False).input_ids


def folder_digest(folder: Path) -> dict[str, str]:
    digest = {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(folder.iterdir())
              if path.name != "vocadapt_init.json"}
    record = json.loads((folder / "vocadapt_init.json").read_text())
    for timing in ("seconds", "method_seconds"):
        record.pop(timing, None)
    return digest | {"record": json.dumps(record, sort_keys=True)}


def test_same_inputs_give_the_same_bytes(trimmed_world, tmp_path):
    from vocadapt.components.surgery.trim import trim_checkpoint

    source_dir, trimmed_dir, _ = trimmed_world
    trim_checkpoint(source_dir, lines("it.train"), tmp_path / "again", min_count=MIN_COUNT)
    again = folder_digest(tmp_path / "again")
    assert again == folder_digest(trimmed_dir) | {"record": again["record"]}
    assert json.loads(again["record"]) | {"source_model": ""} == \
        json.loads(folder_digest(trimmed_dir)["record"]) | {"source_model": ""}


def test_min_count_and_size(tmp_path):
    from transformers import AutoTokenizer

    from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, train_tokenizer
    from vocadapt.components.tokenizers.trim import count_token_ids

    train_tokenizer([CORPORA / "it.train.txt", CORPORA / "en.train.txt"], TokenizerTrainingSpec("bytelevel-bpe", 420),
                    tmp_path)
    source = AutoTokenizer.from_pretrained(str(tmp_path))
    documents = lines("it.train")
    counts = count_token_ids(source, documents)
    frequent = trim_tokenizer(source, documents, min_count=5)
    kept = set(frequent.target_to_source.values())
    assert {token_id for token_id, count in counts.items() if count >= 5} <= kept
    assert any(count < 5 for token_id, count in counts.items() if token_id not in kept)
    small = trim_tokenizer(source, documents, size=300)
    assert len(small.tokenizer) <= 300 and len(small.tokenizer) > 256
    for text in documents[:20]:
        assert small.tokenizer.decode(small.tokenizer(text).input_ids) == text
    with pytest.raises(UserError, match="not both"):
        trim_tokenizer(source, documents, min_count=2, size=300)
    with pytest.raises(UserError, match="smaller than the"):
        trim_tokenizer(source, documents, size=10)


def test_a_wordpiece_tokenizer_is_refused(tmp_path):
    from transformers import AutoTokenizer

    from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, train_tokenizer

    train_tokenizer([CORPORA / "it.train.txt"], TokenizerTrainingSpec("wordpiece", 300), tmp_path)
    with pytest.raises(UserError, match="only BPE"):
        trim_tokenizer(AutoTokenizer.from_pretrained(str(tmp_path)), lines("it.train"))


def test_the_command_writes_a_loadable_model_and_honours_overwrite(trimmed_world, tmp_path):
    from typer.testing import CliRunner
    from transformers import AutoModelForCausalLM

    from vocadapt.cli.app import app

    source_dir, _, _ = trimmed_world
    args = ["trim", str(source_dir), "--corpus", str(CORPORA / "it.train.txt"), "--out", str(tmp_path / "out"),
            "--size", "300"]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "before: total" in result.output and "after: total" in result.output
    record = json.loads((tmp_path / "out" / "vocadapt_init.json").read_text())
    assert record["rows"] <= 300 and record["parameters"]["after"]["vocab_size"] == record["rows"]
    assert record["parameters"]["change"] < 0
    assert AutoModelForCausalLM.from_pretrained(str(tmp_path / "out")).config.vocab_size == record["rows"]
    again = CliRunner().invoke(app, args[:-1] + ["280", "--overwrite"], catch_exceptions=False)
    assert again.exit_code == 0, again.output
    assert json.loads((tmp_path / "out" / "vocadapt_init.json").read_text())["rows"] <= 280
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out"]  # no staging folder left beside it


def test_init_mode_trim_trims_the_source_tokenizer_in_the_adapt_steps(trimmed_world, tmp_path):
    from transformers import AutoTokenizer

    from vocadapt.pipelines.vocabulary_steps import train_target_tokenizer
    from vocadapt.platform.config import ExperimentConfig
    from vocadapt.platform.assets.sources import ResolvedInputs

    source_dir, _, _ = trimmed_world
    config = ExperimentConfig.model_validate({"target": {"language": "it"}, "init": {"mode": "trim", "methods": ["fvt"]},
                                              "tokenizer": {"trim_min_count": MIN_COUNT}})
    inputs = ResolvedInputs(str(source_dir), (CORPORA / "it.train.txt",), (), (CORPORA / "en.train.txt",), (), False)
    source = AutoTokenizer.from_pretrained(str(source_dir))
    tokenizer, change, folder = train_target_tokenizer(config, inputs, source, tmp_path)
    assert change.new_token_ids == [] and len(change.target_to_source) == len(tokenizer)
    assert AutoTokenizer.from_pretrained(str(folder)).get_vocab() == tokenizer.get_vocab()
    both = trim_tokenizer(source, lines("it.train") + lines("en.train"), min_count=MIN_COUNT)
    assert both.target_to_source == change.target_to_source  # target- and source-language text, both read
    assert len(trim_tokenizer(source, lines("it.train"), min_count=MIN_COUNT).tokenizer) < len(tokenizer)
