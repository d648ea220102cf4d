"""Does the tokenizer fit the model? Bad model-side input from the real family tokenizers.

- a tokenizer larger than the embedding (Qwen3's 151,669 ids against a config of 151,000 rows) is refused before
  any work, by ``vocadapt adapt``'s preflight (against config.json) and by ``vocadapt init`` (against the matrix,
  before a helper is trained), naming both numbers and the fix;
- a vocabulary padded to a multiple: Qwen3's 151,669 ids in 151,936 rows and DeepSeek-V3's 128,815 in 129,280.
  Expansion gives new tokens the ids after the tokenizer's highest id (never a special's or a padding row's
  meaning: the padding rows they take are initialised, the rest are kept bit for bit) and the adapted config's
  vocab_size covers every id: Qwen3's 300 new ids run past its padding, so its rows grow to 151,969 with no
  padding left; DeepSeek-V3's fit inside its padding, so its rows stay 129,280 and rows 129,115..129,279 keep
  the source's padding rows;
- a ``--rows`` smaller than the target's ids is refused.

The checkpoints have the real rows and a hidden size of 8: the numbers that matter here are ids and rows (the real
width is ``test_family_initializers.py``'s).
"""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from tests.families import family_surgery_world as world
from vocadapt.cli.app import app
from vocadapt.components.errors import UserError
from vocadapt.components.surgery import Initialisation, RowLayout, adapt_checkpoint
from vocadapt.components.surgery.checkpoint import CheckpointWriting
from vocadapt.platform.families.catalogue import model_family

HIDDEN = 8


def test_qwen3_tokenizer_past_the_config_rows_is_refused_by_the_preflight(family_tokenizers, tmp_path):
    from vocadapt.pipelines.preflight import check_source_tokenizer_fits
    from vocadapt.platform.config import load_config

    short = world.write_family_checkpoint(tmp_path / "short", "qwen3", family_tokenizers["qwen3"], hidden=HIDDEN,
                                          rows=151_000)
    config = load_config(None, ["target.language=it", f"source.model={short}"])
    with pytest.raises(UserError, match=r"151,669 tokens with ids up to 151,668, but the model has only 151,000 "
                                        r"embedding rows \(config.json vocab_size\).*resize_token_embeddings\(151669\)"):
        check_source_tokenizer_fits(config, short)
    padded = world.write_family_checkpoint(tmp_path / "padded", "qwen3", family_tokenizers["qwen3"], hidden=HIDDEN)
    check_source_tokenizer_fits(config, padded)  # 151,669 ids in 151,936 rows: padding is fine


def test_qwen3_tokenizer_past_the_matrix_rows_is_refused_by_init_before_any_work(family_tokenizers, tmp_path):
    short = world.write_family_checkpoint(tmp_path / "short", "qwen3", family_tokenizers["qwen3"], hidden=HIDDEN,
                                          rows=151_000)
    target = world.target_tokenizer_dir("qwen3", str(family_tokenizers["qwen3"]))
    # the initialiser file asks for the same folder with its size given (and may run first in this worker): one
    # folder, trained once (two cache keys once trained it twice into one folder, and the second was refused)
    assert world.target_tokenizer_dir("qwen3", family_tokenizers["qwen3"], 2000) == target
    out = tmp_path / "out"
    # sava with a fastText helper: the helper would be trained first if the check came late
    result = CliRunner().invoke(app, ["init", "--source-model", str(short), "--target-tokenizer", str(target),
                                      "--out", str(out), "--method", "sava", "--helper", "fasttext",
                                      "--corpus", world.italian_corpus_file()])
    output = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    # the model-folder check every command runs first names it: the tokenizer file, the rows, the fix
    assert "tokenizer.json) has ids up to 151,668" in output and "only 151,000 embedding rows" in output, output
    assert "resize_token_embeddings(151669)" in output and "Traceback" not in output
    assert sorted(path.name for path in tmp_path.iterdir()) == ["short"]  # no output, no temporary folder


@pytest.mark.parametrize("name", ["qwen3", "deepseek_v3"])
def test_expansion_of_a_padded_vocabulary(name, family_tokenizers, load_family_tokenizer, tmp_path):
    family = model_family(name)
    source = load_family_tokenizer(name)
    expanded_dir = world.expanded_tokenizer_dir(name, str(family_tokenizers[name]))
    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

    target = load_pretrained_tokenizer(str(expanded_dir))
    highest = max(source.get_vocab().values())
    assert highest + 1 == len(source) == family.tokenizer_size < family.vocab_rows  # padded
    source_vocabulary, target_vocabulary = source.get_vocab(), target.get_vocab()
    # every source token (specials and reserved ones included) keeps its id; new ids come after the highest one
    assert all(target_vocabulary[token] == token_id for token, token_id in source_vocabulary.items())
    new_ids = sorted(set(target_vocabulary.values()) - set(source_vocabulary.values()))
    assert new_ids == list(range(highest + 1, highest + 1 + world.NEW_TOKENS))
    assert len(set(target_vocabulary.values())) == len(target_vocabulary)  # no two tokens share an id

    source_dir = world.write_family_checkpoint(tmp_path / "source", name, family_tokenizers[name], hidden=HIDDEN)
    record = adapt_checkpoint(source_dir, expanded_dir, tmp_path / "out", Initialisation("fvt"),
                              layout=RowLayout("expand"), writing=CheckpointWriting(link="symlink"))
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    rows = max(family.vocab_rows, highest + 1 + world.NEW_TOKENS)
    assert config["vocab_size"] == record["rows"] == rows > max(target_vocabulary.values())
    assert record["new_id_ranges"] == [[new_ids[0], new_ids[-1] + 1]]
    tensors = ["model.embed_tokens.weight"] + ([] if family.tied else ["lm_head.weight"])
    for seed, tensor in enumerate(tensors):
        adapted = torch.cat([block for _, block in world.row_blocks(tmp_path / "out", tensor)])
        original = world.seeded_matrix(family.vocab_rows, HIDDEN, seed=seed)
        assert adapted.shape == (rows, HIDDEN)
        assert torch.equal(adapted[: highest + 1], original[: highest + 1])  # every source row, specials included
        padding_taken = [i for i in new_ids if i < family.vocab_rows]
        assert padding_taken, "the first new ids take padding rows"
        assert not torch.equal(adapted[padding_taken], original[padding_taken])  # initialised, not left as padding
        padding_kept = range(new_ids[-1] + 1, family.vocab_rows)
        assert torch.equal(adapted[padding_kept.start : padding_kept.stop], original[padding_kept.start : padding_kept.stop])
        if name == "deepseek_v3":
            assert len(padding_kept) == 129_280 - 129_115 and rows == family.vocab_rows  # stays padded
        else:
            assert len(padding_kept) == 0 and rows == 151_969  # grew past its padding


def test_rows_smaller_than_the_target_ids_are_refused(family_tokenizers, tmp_path):
    source_dir = world.write_family_checkpoint(tmp_path / "source", "qwen3", family_tokenizers["qwen3"],
                                               hidden=HIDDEN)
    expanded_dir = world.expanded_tokenizer_dir("qwen3", str(family_tokenizers["qwen3"]))
    result = CliRunner().invoke(app, ["init", "--source-model", str(source_dir), "--target-tokenizer",
                                      str(expanded_dir), "--out", str(tmp_path / "out"), "--method", "fvt",
                                      "--mode", "expand", "--rows", "151936"])
    output = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert "--rows" in output and "151,936" in output and "151,969" in output, output
    assert not (tmp_path / "out").exists()
