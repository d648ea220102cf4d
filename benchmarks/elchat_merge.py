"""ElChat's merge (``merge.method``) side by side with the adapted model it starts from, on one ``adapt`` run's
checkpoint: the same held-out bits per byte, side-by-side benchmark (cloze, chrF en->it, tokens per character, %Gen,
out-of-domain bits per byte) and Italian chat turn for every arm, the way ``adapt`` scores them.

    nice -n 10 .venv/bin/python benchmarks/elchat_merge.py configs/italian-smollm2-expand.yaml \\
        --adapted <output_dir>/<name>/it/fvt/lapt/model --out /tmp/elchat/merged --json /tmp/elchat/merge.json

Arms: ``adapted`` (the checkpoint as registered without the merge), ``source`` (optional, slow: the chat model) and
one per merge setting in ``--arms`` (``slerp``, ``linear``, ``slerp-chat-rest``: SLERP with the layers outside the
map taken from the chat model). Each arm's scores are printed as they come and written to ``--json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

# The Italian chat turn every arm answers, greedily, through its own chat template (SmolLM2-Instruct's, which adapt keeps)
CHAT = [{"role": "user", "content": "Ciao! Qual è la capitale d'Italia?"}]
ARMS = {
    "slerp": {"method": "elchat-slerp"},
    "linear": {"method": "elchat-linear"},
    "slerp-chat-rest": {"method": "elchat-slerp", "unmerged_layers": "chat"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config")
    parser.add_argument("--adapted", type=Path, required=True, help="the adapt run's final checkpoint")
    parser.add_argument("--out", type=Path, required=True, help="where the merged checkpoints are written")
    parser.add_argument("--arms", default="adapted,slerp,linear", help="comma-separated: source, adapted, " +
                        ", ".join(ARMS))
    parser.add_argument("--chat-only", default="", help="comma-separated arms scored on the chat turn alone (their "
                        "other scores taken from the adapt run, which computes them the same way)")
    parser.add_argument("--rates", default=None, help="layer -> chat share, YAML (default: ElChat's "
                        "{0: 0.3, 1: 0.5, -2: 0.5, -1: 0.3})")
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args()

    from vocadapt.components.evaluation.bootstrap import parts_to_json
    from vocadapt.components.merging import MergeSettings, merge_model_folders
    from vocadapt.components.tokenizers.overlap import new_token_ids
    from vocadapt.pipelines.side_by_side import SourceVocabulary, items_for_config, score_model
    from vocadapt.pipelines.vocabulary_steps import held_out_bits_per_byte
    from vocadapt.platform.config import load_config
    from vocadapt.platform.model_loading import load_model
    from vocadapt.platform.assets.sources import read_documents, resolve_inputs

    config = load_config(args.config)
    inputs = resolve_inputs(config)
    items = items_for_config(config, inputs)
    held_out = {"target": read_documents(inputs.target_validation, config.evaluation.max_documents),
                "source": read_documents(inputs.source_validation, config.evaluation.max_documents)}
    chat_dir = Path(inputs.source_model)
    _, source_tokenizer = load_model(chat_dir, what="source model")
    results = json.loads(args.json.read_text()) if args.json.exists() else {}
    chat_only = set(filter(None, args.chat_only.split(",")))
    for arm in [*args.arms.split(","), *sorted(chat_only)]:
        started = time.perf_counter()
        folder = {"source": chat_dir, "adapted": args.adapted}.get(arm)
        merge_seconds = None
        if folder is None:
            folder = args.out / arm
            import yaml

            settings = MergeSettings(**ARMS[arm], **({"rates": yaml.safe_load(args.rates)} if args.rates else {}))
            merge_started = time.perf_counter()
            merge_model_folders(args.adapted, chat_dir, folder, settings)
            merge_seconds = time.perf_counter() - merge_started
        model, tokenizer = load_model(folder, what=arm)
        if arm in chat_only:
            results.setdefault(arm, {})["chat"] = chat_reply(model, tokenizer, max_new_tokens=48)
            print(arm, results[arm]["chat"], flush=True)
            args.json.write_text(json.dumps(results, indent=2, ensure_ascii=False))
            continue
        scores = {f"bpb_{stream}": value for stream, value in held_out_bits_per_byte(model, tokenizer, held_out,
                                                                                     config).items()}
        item_parts: dict = {}
        scores |= score_model(model, tokenizer, items, source=SourceVocabulary(
            source_tokenizer, None if arm == "source" else new_token_ids(source_tokenizer, tokenizer)),
            item_parts=item_parts)
        scores["chat"] = chat_reply(model, tokenizer, max_new_tokens=48)
        scores["merge_seconds"] = merge_seconds
        scores["seconds"] = time.perf_counter() - started
        scores["item_parts"] = {name: parts_to_json(parts) for name, parts in item_parts.items()}
        results[arm] = scores
        print(arm, json.dumps({k: v for k, v in scores.items() if k != "item_parts"}, ensure_ascii=False), flush=True)
        args.json.write_text(json.dumps(results, indent=2, ensure_ascii=False))
        del model
    print_differences(results)


def chat_reply(model, tokenizer, max_new_tokens: int = 40) -> str:
    """The model's greedy reply to ``CHAT`` through its own chat template, special tokens left out."""
    import torch

    prompt = tokenizer.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"].to(model.device)
    model.eval()
    with torch.no_grad():
        output = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False,
                                eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.eos_token_id)
    return tokenizer.decode(output[0, ids.shape[1]:], skip_special_tokens=True).strip()


def print_differences(results: dict, reference: str = "adapted") -> None:
    """Each arm's gated measures minus ``reference``'s, with the paired bootstrap's 95% interval over the same
    items (what the promotion gates compute; ``components/evaluation/bootstrap.py``)."""
    from vocadapt.components.evaluation.bootstrap import paired_bootstrap, parts_from_json

    base = results.get(reference, {}).get("item_parts")
    if not base:
        return
    print(f"\narm - {reference}, 95% paired bootstrap interval over the same items:")
    for arm, scores in results.items():
        if arm == reference or not scores.get("item_parts"):
            continue
        for name, entry in sorted(scores["item_parts"].items()):
            if name in base:
                interval = paired_bootstrap(parts_from_json(entry), parts_from_json(base[name]))
                print(f"  {arm:16s} {name:55s} {interval.estimate:+.4f} [{interval.low:+.4f}, {interval.high:+.4f}]"
                      f" ({interval.items} items)")


if __name__ == "__main__":
    main()
