"""ElChat's post-hoc merge (components/merging/elchat.py) on tiny Llamas built here: which tensor comes from where,
SLERP against lerp, the special rows, negative layers, and the inputs it refuses."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from vocadapt.components.errors import UserError
from vocadapt.components.merging import (
    MergeSettings, StateDictLayout, lerp, merge_model_folders, merge_state_dicts, resolve_rates, restored_token_ids, slerp,
)

TEXT = ["La città di Roma è la capitale d'Italia.", "Il gatto dorme sul divano.",
        "The quick brown fox jumps over the lazy dog."] * 10
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
LAYERS = 4
EMBED = "model.embed_tokens.weight"


def chat_tokenizer(text=TEXT, size=280):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=size, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    backend.train_from_iterator(text, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=SPECIALS[0], eos_token=SPECIALS[2],
                                        pad_token=SPECIALS[0], additional_special_tokens=SPECIALS[1:2])
    tokenizer.chat_template = TEMPLATE
    return tokenizer


def expanded(tokenizer):
    """The chat tokenizer with new tokens after its ids (what an expansion's id layout is), no chat template."""
    grown = copy.deepcopy(tokenizer)
    grown.add_tokens(["capitalissima", "gattone", "divanetto"])
    grown.chat_template = None
    return grown


def tiny_pair(tied=True, bias=False, rows=None):
    """(chat model, adapted model): the adapted one has ``rows`` embedding rows (3 more by default) and every
    weight moved."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=280, hidden_size=32, intermediate_size=64, num_hidden_layers=LAYERS,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         tie_word_embeddings=tied, attention_bias=bias, bos_token_id=0, eos_token_id=2)
    chat = LlamaForCausalLM(config)
    adapted = copy.deepcopy(chat)
    adapted.resize_token_embeddings(rows or 283, mean_resizing=False)
    with torch.no_grad():
        for parameter in adapted.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    return chat, adapted


def merge(chat, adapted, restore=(0, 1, 2), **settings):
    settings = MergeSettings(**({"method": "elchat-slerp"} | settings))
    # a tied model's state dict names its one matrix twice: both are the rows' tensors
    return merge_state_dicts(adapted.state_dict(), chat.state_dict(), StateDictLayout(LAYERS, head="lm_head.weight"),
                             settings=settings, restore_ids=list(restore))


def layer_weights(state, layer):
    return {k: v for k, v in state.items() if k.startswith(f"model.layers.{layer}.") and k.endswith(".weight")}


@pytest.mark.parametrize("method", ["elchat-slerp", "elchat-linear"])
def test_t0_gives_the_adapted_weights_and_t1_the_chat_weights(method):
    chat, adapted = tiny_pair()
    for t, expected in ((0.0, adapted.state_dict()), (1.0, chat.state_dict())):
        merged, record = merge(chat, adapted, method=method, rates={0: t, -1: t})
        for layer in (0, LAYERS - 1):
            weights = layer_weights(merged, layer)
            assert len(weights) == 9  # q, k, v, o, gate, up, down and the two norms
            for name, tensor in weights.items():
                torch.testing.assert_close(tensor, expected[name], rtol=0, atol=1e-6)
        assert record["rates"] == {0: t, LAYERS - 1: t}


def test_a_half_merge_lies_between_and_slerp_is_not_lerp_for_distant_matrices():
    chat, adapted = tiny_pair()
    linear, _ = merge(chat, adapted, method="elchat-linear", rates={1: 0.5})
    spherical, _ = merge(chat, adapted, method="elchat-slerp", rates={1: 0.5})
    name = "model.layers.1.mlp.down_proj.weight"
    a, c = adapted.state_dict()[name], chat.state_dict()[name]
    torch.testing.assert_close(linear[name], (a + c) / 2)
    # the two matrices are far from parallel (noise of 0.05 on weights of std 0.02), so the arc is not the chord
    assert not torch.allclose(spherical[name], linear[name], atol=1e-4)
    # SLERP keeps the norm between the two ends' (lerp shrinks it)
    assert spherical[name].norm() > linear[name].norm()


def test_slerp_equals_lerp_for_parallel_tensors_and_follows_the_arc_otherwise():
    a = torch.randn(6, 5)
    torch.testing.assert_close(slerp(0.3, a, 2.5 * a), lerp(0.3, a, 2.5 * a))
    torch.testing.assert_close(slerp(0.3, a, torch.zeros_like(a)), 0.7 * a)  # a zero vector: lerp
    x, y = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    torch.testing.assert_close(slerp(0.5, x, y), torch.tensor([2 ** -0.5, 2 ** -0.5]))
    torch.testing.assert_close(slerp(1 / 3, x, y), torch.tensor([3 ** 0.5 / 2, 0.5]))


def test_special_rows_come_back_from_the_chat_model_and_every_other_row_is_the_adapted_one():
    chat, adapted = tiny_pair(tied=False)
    merged, record = merge(chat, adapted, restore=(0, 2, 7))
    for name in (EMBED, "lm_head.weight"):
        rows, a, c = merged[name], adapted.state_dict()[name], chat.state_dict()[name]
        assert rows.shape == a.shape == (283, 32)
        torch.testing.assert_close(rows[[0, 2, 7]], c[[0, 2, 7]], rtol=0, atol=0)
        others = [i for i in range(283) if i not in (0, 2, 7)]
        torch.testing.assert_close(rows[others], a[others], rtol=0, atol=0)
    assert record["restored_token_ids"] == [0, 2, 7]


def test_untouched_layers_are_the_adapted_models_and_the_final_norm_and_biases_the_chat_models():
    chat, adapted = tiny_pair(bias=True)
    a, c = adapted.state_dict(), chat.state_dict()
    # with 4 layers the default map {0, 1, -2, -1} is every layer: this one leaves layer 2 out
    merged, record = merge(chat, adapted, rates={0: 0.3, 1: 0.5, -1: 0.3})
    untouched = [name for name in merged if name.startswith("model.layers.2.")]
    assert len(untouched) == 13  # 9 weights and the 4 attention biases
    for name in untouched:
        assert torch.equal(merged[name], a[name]) and record["tensors"][name] == "adapted", name
    assert torch.equal(merged["model.norm.weight"], c["model.norm.weight"])
    biases = [name for name in merged if name.startswith("model.layers.0.") and name.endswith(".bias")]
    assert len(biases) == 4
    for name in biases:
        assert torch.equal(merged[name], c[name]) and not torch.equal(c[name], a[name])
    chat_rest, _ = merge(chat, adapted, rates={0: 0.3}, unmerged_layers="chat")
    assert torch.equal(chat_rest["model.layers.2.mlp.up_proj.weight"], c["model.layers.2.mlp.up_proj.weight"])


def test_negative_layers_resolve_against_the_layer_count():
    assert resolve_rates({0: 0.3, 1: 0.5, -2: 0.5, -1: 0.3}, 30) == {0: 0.3, 1: 0.5, 28: 0.5, 29: 0.3}
    # the reference's pitfall: an asymmetric map still lands on the named layers
    assert resolve_rates({-1: 0.2, 0: 0.9}, 6) == {0: 0.9, 5: 0.2}
    chat, adapted = tiny_pair()
    merged, record = merge(chat, adapted, method="elchat-linear", rates={-1: 1.0})
    name = f"model.layers.{LAYERS - 1}.self_attn.o_proj.weight"
    assert torch.equal(merged[name], chat.state_dict()[name])
    assert torch.equal(merged["model.layers.0.self_attn.o_proj.weight"],
                       adapted.state_dict()["model.layers.0.self_attn.o_proj.weight"])
    with pytest.raises(UserError, match="layer -5"):
        resolve_rates({-5: 0.3}, LAYERS)
    with pytest.raises(UserError, match="layer 4"):
        resolve_rates({4: 0.3}, LAYERS)
    with pytest.raises(UserError, match="twice"):
        resolve_rates({3: 0.3, -1: 0.5}, LAYERS)


def test_bad_settings_and_mismatched_models_are_refused():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="outside"):
        MergeSettings(method="elchat-slerp", rates={0: 1.5})
    with pytest.raises(ValidationError, match="rats"):
        MergeSettings(rats={0: 0.5})
    chat, adapted = tiny_pair()
    with pytest.raises(UserError, match="'none'"):
        merge(chat, adapted, method="none")
    state = adapted.state_dict()
    state["model.layers.1.mlp.up_proj.weight"] = torch.zeros(65, 32)
    with pytest.raises(UserError, match="up_proj"):
        merge_state_dicts(state, chat.state_dict(), StateDictLayout(LAYERS), settings=MergeSettings(method="elchat-slerp"),
                          restore_ids=[0])
    fewer = {k: v for k, v in adapted.state_dict().items() if "layers.3." not in k}
    with pytest.raises(UserError, match="different tensors"):
        merge_state_dicts(fewer, chat.state_dict(), StateDictLayout(LAYERS), settings=MergeSettings(method="elchat-slerp"),
                          restore_ids=[0])


def test_only_an_expansion_is_merged():
    tokenizer = chat_tokenizer()
    ids = restored_token_ids(tokenizer, expanded(tokenizer))
    assert ids == sorted(tokenizer.convert_tokens_to_ids(SPECIALS))
    retrained = chat_tokenizer(text=list(reversed(TEXT)) + ["Un altro testo del tutto diverso."], size=260)
    with pytest.raises(UserError, match="expand"):
        restored_token_ids(tokenizer, retrained)


def save_pair(tmp_path, tied=True):
    chat, adapted = tiny_pair(tied=tied)
    tokenizer = chat_tokenizer()
    assert len(tokenizer) == 280
    chat.save_pretrained(tmp_path / "chat")
    tokenizer.save_pretrained(tmp_path / "chat")
    adapted.save_pretrained(tmp_path / "adapted")
    expanded(tokenizer).save_pretrained(tmp_path / "adapted")
    return chat, adapted, tokenizer


@pytest.mark.parametrize("tied", [True, False])
def test_merging_two_folders_writes_a_loadable_model_with_the_chat_template(tmp_path, tied):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    chat, adapted, tokenizer = save_pair(tmp_path, tied)
    settings = MergeSettings(method="elchat-linear", rates={0: 1.0, -1: 0.5})
    record = merge_model_folders(tmp_path / "adapted", tmp_path / "chat", tmp_path / "merged", settings)
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged").state_dict()
    a, c = adapted.state_dict(), chat.state_dict()
    assert torch.equal(merged["model.layers.0.mlp.gate_proj.weight"], c["model.layers.0.mlp.gate_proj.weight"])
    torch.testing.assert_close(merged["model.layers.3.mlp.gate_proj.weight"],
                               (a["model.layers.3.mlp.gate_proj.weight"] + c["model.layers.3.mlp.gate_proj.weight"]) / 2)
    assert torch.equal(merged["model.layers.1.mlp.gate_proj.weight"], a["model.layers.1.mlp.gate_proj.weight"])
    specials = sorted(tokenizer.convert_tokens_to_ids(SPECIALS))
    assert record["restored_token_ids"] == specials
    assert torch.equal(merged[EMBED][specials], c[EMBED][specials])
    assert torch.equal(merged[EMBED][3:], a[EMBED][3:])
    if not tied:
        assert torch.equal(merged["lm_head.weight"][specials], c["lm_head.weight"][specials])
    merged_tokenizer = AutoTokenizer.from_pretrained(tmp_path / "merged")
    assert len(merged_tokenizer) == 283 and merged_tokenizer.chat_template == TEMPLATE
    assert json.loads((tmp_path / "merged" / "vocadapt_merge.json").read_text())["method"] == "elchat-linear"


def test_folders_of_different_architectures_or_a_replaced_vocabulary_are_refused(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    save_pair(tmp_path)
    settings = MergeSettings(method="elchat-slerp")
    other = LlamaForCausalLM(LlamaConfig(vocab_size=283, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2))
    other.save_pretrained(tmp_path / "other")
    with pytest.raises(UserError, match="different architectures"):
        merge_model_folders(tmp_path / "other", tmp_path / "chat", tmp_path / "merged", settings)
    retrained = chat_tokenizer(text=list(reversed(TEXT)) + ["Un altro testo del tutto diverso."], size=260)
    retrained.save_pretrained(tmp_path / "adapted")
    with pytest.raises(UserError, match="init.mode expand"):
        merge_model_folders(tmp_path / "adapted", tmp_path / "chat", tmp_path / "merged", settings)
    assert not (tmp_path / "merged").exists() and not list(tmp_path.glob(".merged*"))


def test_added_tokens_are_restored_only_when_asked():
    tokenizer = chat_tokenizer()
    tokenizer.add_tokens(["<tool_call>"])  # an added token that is not special (Llama-3.1's header tokens are such)
    tool = tokenizer.convert_tokens_to_ids("<tool_call>")
    grown = expanded(tokenizer)
    assert tool not in restored_token_ids(tokenizer, grown)
    assert tool in restored_token_ids(tokenizer, grown, added_tokens=True)
