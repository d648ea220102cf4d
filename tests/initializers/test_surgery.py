"""Vocabulary surgery end to end: untied heads, expansion of byte-level and sentencepiece tokenizers, special and
padding rows, lazy checkpoint surgery, the CLI, and failures that leave nothing behind."""

from __future__ import annotations

import json

import pytest
import torch

from tests.initializers.tiny_world import (bytelevel_tokenizer, expand_bpe, metaspace_tokenizer, synthetic_lines, ENGLISH,
                                          ITALIAN, tiny_llama)
from vocadapt.components.surgery import (Initialisation, RowLayout, adapt_checkpoint, adapt_embeddings, extra_heads_from_lm_head,
                                         plan_vocabulary)
from vocadapt.components.surgery.checkpoint import CheckpointWriting


def test_untied_head_rows_come_from_the_head(source_tokenizer, target_tokenizer):
    from vocadapt.components.tokenizers import source_pieces

    model = tiny_llama(len(source_tokenizer), tied=False)
    head = model.lm_head.weight.detach().clone()
    plan = plan_vocabulary(source_tokenizer, target_tokenizer, source_rows=head.shape[0])
    adapt_embeddings(model, Initialisation("fvt"), source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer)
    new_ids = plan.new_target_ids.tolist()
    expected = torch.stack([head[pieces].mean(0) for pieces in source_pieces(target_tokenizer, new_ids, source_tokenizer)])
    assert torch.allclose(model.lm_head.weight[new_ids], expected, atol=1e-6)  # from the head, never the input rows
    assert model.config.vocadapt_init["tied"] is False


def test_special_tokens_keep_their_rows_and_config_ids_follow(source_tokenizer, target_tokenizer):
    model = tiny_llama(len(source_tokenizer), tied=True)
    source_rows = model.get_input_embeddings().weight.detach().clone()
    adapt_embeddings(model, Initialisation("random"), source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer)
    rows = model.get_input_embeddings().weight
    for role in ("bos", "eos", "pad"):
        target_id, source_id = getattr(target_tokenizer, f"{role}_token_id"), getattr(source_tokenizer, f"{role}_token_id")
        assert torch.equal(rows[target_id], source_rows[source_id])
        assert getattr(model.config, f"{role}_token_id") == target_id


def test_expansion_of_a_byte_level_tokenizer_keeps_padding_rows(source_tokenizer, expanded_tokenizer):
    padded_rows = len(source_tokenizer) + 20  # the checkpoint pads its matrix past the last id
    model = tiny_llama(padded_rows, tied=False)
    before_input = model.get_input_embeddings().weight.detach().clone()
    before_head = model.lm_head.weight.detach().clone()
    adapt_embeddings(model, Initialisation("merge"), source_tokenizer=source_tokenizer,
                     target_tokenizer=expanded_tokenizer, layout=RowLayout("expand", target_vocab_rows=padded_rows + 64))
    new_count = len(expanded_tokenizer) - len(source_tokenizer)
    assert new_count > 10 and model.config.vocab_size == padded_rows + 64
    rows = model.get_input_embeddings().weight
    assert torch.equal(rows[: len(source_tokenizer)], before_input[: len(source_tokenizer)])
    assert torch.equal(rows[len(expanded_tokenizer) : padded_rows], before_input[len(expanded_tokenizer) : padded_rows])
    assert torch.equal(model.lm_head.weight[: len(source_tokenizer)], before_head[: len(source_tokenizer)])
    english = "the cat sat on the mat"
    assert expanded_tokenizer(english)["input_ids"] == source_tokenizer(english)["input_ids"]
    text = "il gatto dorme sulla sedia"
    assert len(expanded_tokenizer(text)["input_ids"]) < len(source_tokenizer(text)["input_ids"])
    assert torch.isfinite(model(torch.tensor([expanded_tokenizer(text)["input_ids"]])).logits).all()


@pytest.mark.parametrize("method,tied", [("align", True), ("merge", True), ("fvt", False)])
def test_expansion_of_a_sentencepiece_tokenizer(tmp_path, method, tied):
    source_tokenizer = metaspace_tokenizer(synthetic_lines(ENGLISH, 200, seed=5), vocab_size=330)
    italian = metaspace_tokenizer(synthetic_lines(ITALIAN, 200, seed=6), vocab_size=360)
    expanded = expand_bpe(source_tokenizer, italian)
    model = tiny_llama(len(source_tokenizer), tied=tied)
    before = model.get_input_embeddings().weight.detach().clone()
    before_head = model.get_output_embeddings().weight.detach().clone()
    corpus = tmp_path / "it.txt"
    corpus.write_text("\n".join(synthetic_lines(ITALIAN, 50, seed=7)), encoding="utf-8")
    adapt_embeddings(model, Initialisation(method, corpus_files=[str(corpus)]), source_tokenizer=source_tokenizer,
                     target_tokenizer=expanded, layout=RowLayout("expand"))
    assert len(expanded) > len(source_tokenizer)
    assert torch.equal(model.get_input_embeddings().weight[: len(source_tokenizer)], before)
    assert torch.equal(model.get_output_embeddings().weight[: len(source_tokenizer)], before_head)
    assert model.config.vocab_size == len(expanded)
    english, text = "the cat sat on the mat", "il gatto dorme sulla sedia"
    assert expanded(english)["input_ids"] == source_tokenizer(english)["input_ids"]
    ids = expanded(text)["input_ids"]
    assert len(ids) < len(source_tokenizer(text)["input_ids"]) and max(ids) >= len(source_tokenizer)
    assert torch.isfinite(model(torch.tensor([ids])).logits).all()


def test_expansion_rejects_a_tokenizer_that_moves_source_ids(source_tokenizer, target_tokenizer):
    model = tiny_llama(len(source_tokenizer), tied=True)
    with pytest.raises(ValueError, match="keeps every source token at its id"):
        adapt_embeddings(model, Initialisation("fvt"), source_tokenizer=source_tokenizer,
                         target_tokenizer=target_tokenizer, layout=RowLayout("expand"))


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_extra_heads_copy_the_adapted_lm_head(source_tokenizer, target_tokenizer, tied):
    model = tiny_llama(len(source_tokenizer), tied=tied)
    adapt_embeddings(model, Initialisation("fvt"), source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer)
    heads = extra_heads_from_lm_head(model, 2)
    assert len(heads) == 2 and all(torch.equal(head.weight, model.lm_head.weight) for head in heads)
    assert heads[0].weight.shape == (len(target_tokenizer), 32)  # the target vocabulary, new rows included
    pointers = {head.weight.data_ptr() for head in heads}
    assert len(pointers) == 2 and model.lm_head.weight.data_ptr() not in pointers
    assert model.get_input_embeddings().weight.data_ptr() not in pointers
    with torch.no_grad():
        heads[0].weight.add_(1.0)  # the copies are free to move away from the head during MTP training
    assert torch.equal(heads[1].weight, model.lm_head.weight) and not torch.equal(heads[0].weight, heads[1].weight)


def _save_source(tmp_path, source_tokenizer, tied, shard="20KB"):
    folder = tmp_path / f"source-{tied}"
    tiny_llama(len(source_tokenizer), tied).save_pretrained(folder, max_shard_size=shard)
    source_tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("tied,shard", [(False, "20KB"), (True, "50MB")], ids=["untied-sharded", "tied-single-file"])
def test_checkpoint_surgery_equals_in_memory_surgery(tmp_path, source_tokenizer, target_tokenizer, tied, shard):
    from transformers import AutoModelForCausalLM

    source_dir = _save_source(tmp_path, source_tokenizer, tied, shard)
    target_dir = tmp_path / "target"
    target_tokenizer.save_pretrained(target_dir)
    record = adapt_checkpoint(source_dir, target_dir, tmp_path / "out", Initialisation("fvt"),
                              writing=CheckpointWriting(extra_heads=1))
    assert record["tied"] is tied and record["initialised"] > 0 and record["copied"] > 0
    assert json.loads((tmp_path / "out" / "vocadapt_init.json").read_text())["method"] == "fvt"
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "out")
    reference = adapt_embeddings(AutoModelForCausalLM.from_pretrained(source_dir), Initialisation("fvt"), source_tokenizer=source_tokenizer,
                                 target_tokenizer=target_tokenizer)
    expected = reference.state_dict()
    assert all(torch.equal(value, expected[name]) for name, value in loaded.state_dict().items())
    assert loaded.config.vocab_size == len(target_tokenizer)
    assert not (tmp_path / "out" / "model.safetensors").exists()  # a single file would shadow the index
    from safetensors import safe_open

    with safe_open(str(tmp_path / "out" / "model-vocadapt-embeddings.safetensors"), framework="pt") as handle:
        head = "model.embed_tokens.weight" if tied else "lm_head.weight"
        assert torch.equal(handle.get_tensor("mtp_heads.0.weight"), handle.get_tensor(head))


def test_checkpoint_surgery_failure_leaves_nothing(tmp_path, source_tokenizer, target_tokenizer):
    source_dir = _save_source(tmp_path, source_tokenizer, tied=True)
    target_dir = tmp_path / "target"
    target_tokenizer.save_pretrained(target_dir)
    with pytest.raises(ValueError, match="needs a helper"):
        adapt_checkpoint(source_dir, target_dir, tmp_path / "out", Initialisation("sava"))
    with pytest.raises(ValueError, match="no corpus_files"):
        adapt_checkpoint(source_dir, target_dir, tmp_path / "out", Initialisation("align"))
    assert sorted(path.name for path in tmp_path.iterdir()) == ["source-True", "target"]


def test_cli_init_writes_a_checkpoint_and_reports_bad_input(tmp_path, source_tokenizer, target_tokenizer, corpus_file):
    from typer.testing import CliRunner

    from vocadapt.cli.app import app

    source_dir = _save_source(tmp_path, source_tokenizer, tied=True)
    target_dir = tmp_path / "target"
    target_tokenizer.save_pretrained(target_dir)
    runner = CliRunner()
    arguments = ["init", "--source-model", str(source_dir), "--target-tokenizer", str(target_dir), "--out"]
    result = runner.invoke(app, [*arguments, str(tmp_path / "out"), "--method", "focus", "--helper",
                                 "fasttext:dim=8,epoch=1", "--corpus", corpus_file, "--option", "temperature=0.2"])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "out" / "vocadapt_init.json").read_text())["options"] == {"temperature": 0.2}
    missing_helper = runner.invoke(app, [*arguments, str(tmp_path / "out2"), "--method", "salt"])
    assert missing_helper.exit_code == 2 and "needs a helper" in missing_helper.output
    assert "--helper fasttext" in missing_helper.output  # the command line names its own flag
    unknown = runner.invoke(app, [*arguments, str(tmp_path / "out3"), "--method", "nope"])
    assert unknown.exit_code == 2 and "choose one of" in unknown.output
    assert not (tmp_path / "out2").exists() and not (tmp_path / "out3").exists()
    again = runner.invoke(app, [*arguments, str(tmp_path / "out"), "--method", "fvt"])
    assert again.exit_code == 2 and "--out" in again.output and "--overwrite" in again.output


def test_checkpoint_surgery_keeps_bf16_and_copies_shared_rows_bit_for_bit(tmp_path, source_tokenizer, target_tokenizer):
    from safetensors import safe_open

    folder = tmp_path / "bf16"
    tiny_llama(len(source_tokenizer), tied=False).to(torch.bfloat16).save_pretrained(folder)
    source_tokenizer.save_pretrained(folder)
    target_tokenizer.save_pretrained(tmp_path / "target")
    record = adapt_checkpoint(folder, tmp_path / "target", tmp_path / "out", Initialisation("random", seed=1))
    with safe_open(str(folder / "model.safetensors"), framework="pt") as handle:
        source = {name: handle.get_tensor(name) for name in ("model.embed_tokens.weight", "lm_head.weight")}
    with safe_open(str(tmp_path / "out" / "model-vocadapt-embeddings.safetensors"), framework="pt") as handle:
        adapted = {name: handle.get_tensor(name) for name in source}
    plan = plan_vocabulary(source_tokenizer, target_tokenizer, source_rows=len(source_tokenizer))
    targets, sources = list(plan.target_to_source), list(plan.target_to_source.values())
    for name in source:
        assert adapted[name].dtype == torch.bfloat16
        assert torch.equal(adapted[name][targets], source[name][sources])
    assert record["initialised"] == len(plan.new_target_ids)


def _stop_ids(source_tokenizer, target_tokenizer) -> tuple[list[int], list[int]]:
    """A generation config's several stop ids in the source (its eos, a token the target has too, one it lacks) and
    what they must become in the target: the same tokens' ids, the missing one dropped."""
    target_vocabulary = target_tokenizer.get_vocab()
    shared = next(token for token in source_tokenizer.get_vocab() if token in target_vocabulary
                  and token not in source_tokenizer.all_special_tokens)
    lost = next(token for token in source_tokenizer.get_vocab() if token not in target_vocabulary)
    ids = source_tokenizer.convert_tokens_to_ids
    return ([source_tokenizer.eos_token_id, ids(shared), ids(lost)],
            [target_tokenizer.eos_token_id, target_vocabulary[shared]])


def test_several_stop_ids_follow_their_tokens_in_memory_and_in_a_checkpoint(tmp_path, source_tokenizer,
                                                                             target_tokenizer):
    """Llama-3.1-Instruct's generation config stops at three ids: surgery keeps each stop whose token the target
    has (by text), instead of replacing the list by the tokenizer's one eos."""
    from transformers import AutoModelForCausalLM, GenerationConfig

    source_stops, target_stops = _stop_ids(source_tokenizer, target_tokenizer)
    model = tiny_llama(len(source_tokenizer), tied=True)
    model.generation_config.eos_token_id = source_stops
    adapt_embeddings(model, Initialisation("fvt"), source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer)
    assert model.generation_config.eos_token_id == target_stops
    assert model.config.eos_token_id == target_tokenizer.eos_token_id  # a single id stays the tokenizer's own

    source_dir = tmp_path / "source"
    source = tiny_llama(len(source_tokenizer), tied=False)
    source.generation_config.eos_token_id = source_stops
    source.config.eos_token_id = source_stops
    source.save_pretrained(source_dir)
    source_tokenizer.save_pretrained(source_dir)
    target_tokenizer.save_pretrained(tmp_path / "target")
    adapt_checkpoint(source_dir, tmp_path / "target", tmp_path / "out", Initialisation("fvt"))
    assert GenerationConfig.from_pretrained(tmp_path / "out").eos_token_id == target_stops
    assert AutoModelForCausalLM.from_pretrained(tmp_path / "out").config.eos_token_id == target_stops


def test_a_tokenizer_that_grows_is_checked_against_its_new_highest_id(english_lines):
    """The highest id is remembered per tokenizer object (read once for every method's surgery), and read again
    once a token was added: a tokenizer grown past the model's rows is refused, not passed on its earlier size."""
    from vocadapt.components.errors import UserError
    from vocadapt.components.surgery.plan import check_tokenizer_fits, highest_token_id

    tokenizer = bytelevel_tokenizer(english_lines, vocab_size=300)  # its own: the session fixture's is shared
    rows = highest_token_id(tokenizer) + 1
    check_tokenizer_fits(tokenizer, rows)
    tokenizer.add_tokens(["<grown>"])
    assert highest_token_id(tokenizer) == rows
    with pytest.raises(UserError, match="ids up to"):
        check_tokenizer_fits(tokenizer, rows)
