"""One test over the whole registry (STYLE habit 10): every method, tied and untied, replacement and expansion."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.initializers.tiny_world import tiny_llama
from vocadapt.components.initializers import available_initializers, get_initializer
from vocadapt.components.surgery import Initialisation, RowLayout, adapt_embeddings, plan_vocabulary

METHODS = available_initializers()
# Methods that read files their options name: the tiny ones of their own tests (WECHSEL: fastText models, dictionary).
_DATA = Path(__file__).parent / "data"
OPTIONS = {"wechsel": {"source_vectors": str(_DATA / "wechsel_source.bin"),
                       "target_vectors": str(_DATA / "wechsel_target.bin"),
                       "dictionary": str(_DATA / "wechsel_dictionary.txt")}}


def test_registry_holds_one_method_per_file_and_the_mean_alias():
    """The list comes from the registry: every method file registers its own name, and nothing else is listed."""
    from pathlib import Path

    import vocadapt.components.initializers as package

    files = {path.stem for folder in package.__path__ for path in Path(folder).glob("[!_]*.py")}
    assert set(METHODS) == files and len(METHODS) >= 10
    assert get_initializer("mean") is get_initializer("fvt")


def test_registry_answers_which_methods_need_a_helper_and_which_helpers_they_accept():
    with_helper, without = available_initializers(needs_helper=True), available_initializers(needs_helper=False)
    assert sorted(with_helper + without) == METHODS and with_helper and without
    for name in METHODS:  # a method that needs a helper names the kinds it accepts; one that needs none names none
        entry = get_initializer(name)
        assert bool(entry.helpers) == entry.needs_helper
        assert set(entry.helpers) <= {"fasttext", "model", "vectors"}


def test_unknown_method_and_option_name_the_nearest_valid_one():
    from vocadapt.components.initializers import configure_initializer

    with pytest.raises(KeyError, match="did you mean fvt?"):
        configure_initializer("fvtt")
    with pytest.raises(ValueError, match="solvr: unknown field; did you mean solver?"):
        configure_initializer("sava", {"solvr": "sgd"})
    configured = configure_initializer("mean", {})
    assert configured.initializer is get_initializer("fvt") and configured.name == "mean"
    assert configure_initializer(configured) is configured


def _adapt(method, tied, mode, source_tokenizer, target, helper, corpus_file):
    model = tiny_llama(len(source_tokenizer), tied)
    source_input = model.get_input_embeddings().weight.detach().clone()
    source_output = model.get_output_embeddings().weight.detach().clone()
    adapt_embeddings(
        model, Initialisation(method, options=OPTIONS.get(method), seed=3, corpus_files=[corpus_file],
                              helper=helper if get_initializer(method).needs_helper else None),
        source_tokenizer=source_tokenizer, target_tokenizer=target, layout=RowLayout(mode),
    )
    return model, source_input, source_output


@pytest.mark.parametrize("mode", ["replace", "expand"])
@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
@pytest.mark.parametrize("method", METHODS)
def test_every_method(method, tied, mode, source_tokenizer, target_tokenizer, expanded_tokenizer, fasttext_helper, corpus_file):
    target = target_tokenizer if mode == "replace" else expanded_tokenizer
    model, source_input, source_output = _adapt(method, tied, mode, source_tokenizer, target, fasttext_helper, corpus_file)
    plan = plan_vocabulary(source_tokenizer, target, source_rows=source_input.shape[0], layout=RowLayout(mode))
    new_input = model.get_input_embeddings().weight.detach()
    new_output = model.get_output_embeddings().weight.detach()
    assert new_input.shape == (plan.rows, 32) and new_output.shape == (plan.rows, 32)
    assert model.config.vocab_size == plan.rows
    assert torch.isfinite(new_input).all() and torch.isfinite(new_output).all()
    assert len(plan.new_target_ids) > 0 and len(plan.target_to_source) > 0
    targets = torch.tensor(list(plan.target_to_source))
    sources = torch.tensor(list(plan.target_to_source.values()))
    assert torch.equal(new_input[targets], source_input[sources])  # bit for bit
    assert torch.equal(new_output[targets], source_output[sources])
    if tied:
        assert new_output.data_ptr() == new_input.data_ptr()
    else:
        assert new_output.data_ptr() != new_input.data_ptr()
        assert not torch.equal(new_output[plan.new_target_ids], new_input[plan.new_target_ids])
    if mode == "expand":
        assert torch.equal(new_input[: source_input.shape[0]], source_input)
    again, _, _ = _adapt(method, tied, mode, source_tokenizer, target, fasttext_helper, corpus_file)
    assert torch.equal(again.get_input_embeddings().weight, model.get_input_embeddings().weight)
    assert torch.equal(again.get_output_embeddings().weight, model.get_output_embeddings().weight)
    logits = model(torch.tensor([target("il gatto dorme")["input_ids"]])).logits
    assert logits.shape[-1] == plan.rows and torch.isfinite(logits).all()


@pytest.mark.parametrize("method", available_initializers(needs_helper=True))
def test_helper_methods_without_helper_stop_before_any_work(method, source_tokenizer, target_tokenizer):
    from vocadapt.components.initializers import MissingHelperError

    model = tiny_llama(len(source_tokenizer), tied=True)
    before = model.get_input_embeddings().weight.detach().clone()
    without = ", ".join(available_initializers(needs_helper=False))
    with pytest.raises(MissingHelperError, match=f"needs a helper .*fasttext.*without a helper: {without}$") as error:
        adapt_embeddings(model, Initialisation(method), source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer)
    assert "--" not in str(error.value) and "init.helper" not in str(error.value)  # the callers add how to give one
    assert torch.equal(model.get_input_embeddings().weight, before) and model.config.vocab_size == len(source_tokenizer)


def test_unknown_method_and_option_are_rejected(source_tokenizer, target_tokenizer):
    model = tiny_llama(len(source_tokenizer), tied=True)
    with pytest.raises(KeyError, match="choose one of"):
        adapt_embeddings(model, Initialisation("wechsle"), source_tokenizer=source_tokenizer,
                         target_tokenizer=target_tokenizer)
    with pytest.raises(ValueError, match="has no option"):
        adapt_embeddings(model, Initialisation("fvt", options={"temperature": 1}), source_tokenizer=source_tokenizer,
                         target_tokenizer=target_tokenizer)
