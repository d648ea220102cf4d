"""``adapt``'s merge step (``merge.method``): ElChat's post-hoc merge of a method's adapted model back into the source
chat model (components/merging/elchat.py), after LAPT and the head fit, before the side-by-side evaluation and the
registry, which then see the merged model.

The merged model's held-out bits per byte replace ``bpb_<stream>_after_lapt`` (what the leaderboard, the sweep and
the promotion gates read: they describe the model that is registered); the adapted model's figures stay logged as
``bpb_<stream>_before_merge``. The adapted checkpoint is deleted once the merged one is written.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable


def merge_into_chat_model(config, outcome, chat_model: str, held_out: dict[str, list[str]], tracker, run_id: str,
                          console, account: Callable[[Any], None]) -> dict[str, Any]:
    """Merge ``outcome.model_dir`` with the source chat model into ``<method>/merged``, measure it on the held-out
    text, and point ``outcome`` at it; returns the merge record (also logged as ``merge.json``). ``account``
    receives each stage's energy reading."""
    from vocadapt.components.merging import merge_model_folders
    from vocadapt.pipelines.vocabulary_steps import held_out_bits_per_byte, measure_stage
    from vocadapt.platform.model_loading import load_model, resolve_model_folder

    adapted_dir = Path(outcome.model_dir)
    merged_dir = adapted_dir.parent / "merged" if adapted_dir.name != "merged" else adapted_dir.with_name("merged-2")
    chat_dir = Path(resolve_model_folder(chat_model, what="source model", revision=config.source.revision))
    with measure_stage(config, "merge") as reading:
        record = merge_model_folders(adapted_dir, chat_dir, merged_dir, config.merge)
    account(reading)
    model, tokenizer = load_model(merged_dir, what="merged model")
    with measure_stage(config, "evaluation") as reading:
        merged_bpb = held_out_bits_per_byte(model, tokenizer, held_out, config)
    account(reading)
    del model
    step = outcome.lapt["steps"] if outcome.lapt else 0
    stage = "after_lapt" if outcome.lapt else "zero_shot"
    before = {f"{stream}_before_merge": outcome.bits_per_byte[f"{stream}_{stage}"] for stream in merged_bpb}
    after = {f"{stream}_{stage}": value for stream, value in merged_bpb.items()}
    outcome.bits_per_byte.update(before | after)
    tracker.log_metrics(run_id, {f"bpb_{key}": value for key, value in (before | after).items()}, step=step)
    tracker.log_dict(run_id, record, "merge.json")
    tracker.set_tags(run_id, {"vocadapt.merge": config.merge.method})
    shutil.rmtree(adapted_dir, ignore_errors=True)
    outcome.model_dir = merged_dir
    console.print(f"  merged into the chat model ({config.merge.method}, layers {record['rates']}): "
                  + ", ".join(f"{stream} {before[f'{stream}_before_merge']:.3f} -> {value:.3f}"
                              for stream, value in merged_bpb.items()), highlight=False)
    return record
