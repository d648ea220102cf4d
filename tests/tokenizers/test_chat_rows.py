"""Chat stays chat: an adapted SmolLM2-Instruct keeps its chat template, and the rows of its chat tokens
(``<|im_start|>``, ``<|im_end|>``, ``<|endoftext|>``) are the source model's, in replace and expand mode, through a
save and reload. A model whose special-token rows were re-initialised would still render the template but no
longer know where a turn starts or ends."""

from __future__ import annotations

import pytest
import torch

from vocadapt.components.initializers import configure_initializer
from vocadapt.components.surgery import Initialisation, RowLayout, adapt_embeddings
from vocadapt.components.tokenizers.expand import expand_with_target
from vocadapt.components.tokenizers.replace import replace_vocabulary

CHAT = [{"role": "system", "content": "Sei un assistente."}, {"role": "user", "content": "Ciao, come stai?"}]
SPECIALS = ("<|im_start|>", "<|im_end|>", "<|endoftext|>")


def _tiny_llama(vocabulary: int, tied: bool):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=vocabulary, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, tie_word_embeddings=tied)
    return LlamaForCausalLM(config)


@pytest.mark.parametrize("mode", ["replace", "expand"])
@pytest.mark.parametrize("tied", [True, False])
def test_adapted_chat_model_keeps_template_and_special_rows(smollm2_tokenizer, trained, italian_train, mode, tied,
                                                           tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = _tiny_llama(len(smollm2_tokenizer), tied)
    source_input = source.get_input_embeddings().weight.detach().clone()
    source_output = source.get_output_embeddings().weight.detach().clone()
    target = trained["bytelevel-bpe"]
    change = (replace_vocabulary(smollm2_tokenizer, target) if mode == "replace"
              else expand_with_target(smollm2_tokenizer, target))
    adapted = adapt_embeddings(
        source,
        Initialisation(configure_initializer("fvt"), seed=0, corpus_files=[str(italian_train)]),
        source_tokenizer=smollm2_tokenizer, target_tokenizer=change.tokenizer,
        layout=RowLayout(mode, target_to_source=change.target_to_source, new_target_ids=change.new_token_ids))
    adapted.save_pretrained(tmp_path)
    change.tokenizer.save_pretrained(tmp_path)
    model, tokenizer = AutoModelForCausalLM.from_pretrained(tmp_path), AutoTokenizer.from_pretrained(tmp_path)

    assert tokenizer.chat_template == smollm2_tokenizer.chat_template
    rendered = tokenizer.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    assert rendered == smollm2_tokenizer.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    ids = tokenizer(rendered, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == rendered
    start, end = (tokenizer.convert_tokens_to_ids(token) for token in SPECIALS[:2])
    assert ids.count(start) == 3 and ids.count(end) == 2  # system, user, assistant turns; two closed

    for token in SPECIALS:
        new_id, old_id = tokenizer.convert_tokens_to_ids(token), smollm2_tokenizer.convert_tokens_to_ids(token)
        assert new_id not in change.new_token_ids
        assert torch.equal(model.get_input_embeddings().weight[new_id], source_input[old_id]), token
        assert torch.equal(model.get_output_embeddings().weight[new_id], source_output[old_id]), token
    assert tokenizer.eos_token == smollm2_tokenizer.eos_token
    assert model.config.eos_token_id == tokenizer.eos_token_id

