"""benchmarks/elchat_merge.py's comparison: each merge arm minus the adapted model, with the paired bootstrap's
interval over the same items (the per-item parts each arm's scoring wrote to the JSON)."""

from __future__ import annotations

import numpy as np

from tests.benchmarks.loading import load_benchmark
from vocadapt.components.evaluation.bootstrap import ItemParts, paired_bootstrap, parts_to_json


def _ood_parts(bits: list[float]) -> ItemParts:
    return ItemParts("ratio", np.array([[b, 100.0] for b in bits]), tuple(f"doc{i}" for i in range(len(bits))))


def test_each_merge_arm_is_printed_against_the_adapted_model_with_its_interval(capsys):
    elchat = load_benchmark("elchat_merge")
    adapted, merged = _ood_parts([300, 310, 290, 305]), _ood_parts([295, 309, 280, 300])
    name = "evaluation.out_of_domain.it.bits_per_byte"
    results = {"adapted": {"item_parts": {name: parts_to_json(adapted)}},
               "slerp": {"item_parts": {name: parts_to_json(merged)}},
               "source": {"chat": "only the chat turn"}}
    elchat.print_differences(results)
    printed = capsys.readouterr().out
    want = paired_bootstrap(merged, adapted)
    assert f"slerp            {name}" in printed
    assert f"{want.estimate:+.4f} [{want.low:+.4f}, {want.high:+.4f}] (4 items)" in printed
    assert "source" not in printed.split("items:")[1]  # an arm without parts (chat only) has no line


def test_nothing_is_printed_without_the_adapted_models_parts(capsys):
    load_benchmark("elchat_merge").print_differences({"slerp": {"item_parts": {}}})
    assert capsys.readouterr().out == ""


def test_the_chat_turn_goes_through_the_models_own_template():
    """A tiny chat model answers the Italian turn greedily: the same reply twice, its template's markers left out."""
    from tests.merging.test_elchat import chat_tokenizer, tiny_pair

    elchat = load_benchmark("elchat_merge")
    tokenizer = chat_tokenizer()
    chat, _ = tiny_pair()
    first = elchat.chat_reply(chat, tokenizer, max_new_tokens=6)
    assert first == elchat.chat_reply(chat, tokenizer, max_new_tokens=6)
    assert "<|im_start|>" not in first and "assistant\n" not in first
