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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vocadapt.pipelines.recipe import MethodRun


def merge_into_chat_model(run: MethodRun, outcome) -> dict[str, Any]:
    """Merge ``outcome.model_dir`` with the source chat model (the recipe's ``inputs.source_model``) into
    ``<method>/merged``, measure it on the recipe's held-out text, and point ``outcome`` at it; returns the merge
    record (also logged as ``merge.json`` on the method's run). Both stages' energy goes to the method's ledger."""
    from vocadapt.components.merging import merge_model_folders
    from vocadapt.pipelines.vocabulary_steps import held_out_bits_per_byte
    from vocadapt.platform.model_loading import load_model, resolve_model_folder

    config, tracker, run_id = run.recipe.config, run.recipe.tracker, run.run_id
    adapted_dir = Path(outcome.model_dir)
    merged_dir = adapted_dir.parent / "merged" if adapted_dir.name != "merged" else adapted_dir.with_name("merged-2")
    chat_dir = Path(resolve_model_folder(run.recipe.inputs.source_model, what="source model",
                                         revision=config.source.revision))
    with run.stage("merge"):
        record = merge_model_folders(adapted_dir, chat_dir, merged_dir, config.merge)
    model, tokenizer = load_model(merged_dir, what="merged model")
    with run.stage("evaluation"):
        merged_bpb = held_out_bits_per_byte(model, tokenizer, run.recipe.held_out, config)
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
    run.recipe.console.print(f"  merged into the chat model ({config.merge.method}, layers {record['rates']}): "
                  + ", ".join(f"{stream} {before[f'{stream}_before_merge']:.3f} -> {value:.3f}"
                              for stream, value in merged_bpb.items()), highlight=False)
    return record
