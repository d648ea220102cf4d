"""Loading source models and tokenizers under the config's safety settings, and the glue from the adapt pipeline to
the initialisers and to LAPT on Ray.

``trust_remote_code`` stays off unless the config opts in by name; weights load from safetensors only.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from vocadapt.platform.config import EMBEDDED_MODEL, ExperimentConfig
from vocadapt.platform.sources import ResolvedInputs, read_documents


def _load_kwargs(config: ExperimentConfig) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"trust_remote_code": config.source.trust_remote_code}
    if config.source.revision:
        kwargs["revision"] = config.source.revision
    return kwargs


def load_source_tokenizer(config: ExperimentConfig, model: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model, **_load_kwargs(config))


def load_target_tokenizer(name: str):
    """``tokenizer.pretrained``: an existing tokenizer (folder or hub name), without remote code."""
    from transformers import AutoTokenizer

    from vocadapt.platform.commands._errors import UserError

    try:
        return AutoTokenizer.from_pretrained(name, trust_remote_code=False)
    except (OSError, ValueError) as error:
        raise UserError(f"tokenizer.pretrained: no tokenizer could be loaded from {name!r} ({error}); give a "
                        "folder with tokenizer.json or tokenizer.model, a hub name reachable from here, or null "
                        "to train one") from error  # fmt: skip


def load_source_model(config: ExperimentConfig, model: str):
    import torch
    from transformers import AutoModelForCausalLM

    loaded = AutoModelForCausalLM.from_pretrained(
        model, dtype=getattr(torch, config.source.dtype), use_safetensors=True, **_load_kwargs(config)
    )
    return loaded.eval()


def registered_model_name(config: ExperimentConfig) -> str:
    """``vocadapt-<lang>-<short model name>``, e.g. vocadapt-it-smollm2-135m."""
    if config.source.model == EMBEDDED_MODEL:
        short = "smollm2-135m"
    else:
        short = Path(config.source.model.rstrip("/")).name.lower()
    short = re.sub(r"[^a-z0-9.-]+", "-", short).strip("-")
    return f"vocadapt-{config.target.language}-{short}"


def build_helper(config: ExperimentConfig, target_tokenizer, inputs: ResolvedInputs):
    """The helper the config names (e.g. fastText trained on the target-tokenized corpus), built once per run and
    only when a listed method uses one; None otherwise."""
    from vocadapt.components.helpers import resolve_helper
    from vocadapt.components.initializers import get_initializer

    uses_helper = any(get_initializer(m).needs_helper for m in config.init.methods)
    if not config.init.helper or not uses_helper:
        return None
    return resolve_helper(
        config.init.helper, target_tokenizer=target_tokenizer, corpus_files=list(inputs.target_train),
        seed=config.seed,
    )


def initialise_method(
    config: ExperimentConfig, method: str, source_model, source_tokenizer, target_tokenizer, replacement,
    inputs: ResolvedInputs, helper=None,
):
    """A copy of ``source_model`` with its vocabulary replaced (or expanded) and new rows set by ``method``."""
    import copy

    from vocadapt.components.initializers import get_initializer
    from vocadapt.components.surgery import adapt_embeddings

    initializer = get_initializer(method)
    model = copy.deepcopy(source_model)
    model = adapt_embeddings(
        model,
        source_tokenizer=source_tokenizer,
        target_tokenizer=target_tokenizer,
        target_to_source=replacement.target_to_source,
        new_target_ids=replacement.new_token_ids,
        method=method,
        mode=config.init.mode,
        options=config.init.options.get(method, {}),
        seed=config.seed,
        helper=helper if initializer.needs_helper else None,
        corpus_files=[str(p) for p in inputs.target_train],
    )
    return model, dict(model.config.vocadapt_init)


def continue_pretraining(
    config: ExperimentConfig, inputs: ResolvedInputs, model_dir: Path, workdir: Path, tracker, run_id: str,
    held_out: dict[str, list[str]],
) -> dict[str, Any]:
    """LAPT through Ray Train; returns the trained model directory, its history and held-out bits per byte."""
    from vocadapt.platform.ray_train import run_lapt_on_ray

    result = run_lapt_on_ray(
        model_dir=model_dir,
        tokenizer_dir=model_dir,
        # after-LAPT bits per byte is scored with the same windows as the zero-shot figures
        settings=config.lapt.model_copy(update={"eval_max_length": config.evaluation.max_length,
                                                "eval_batch_size": config.evaluation.batch_size}),
        target_files=list(inputs.target_train),
        source_files=list(inputs.source_train),
        eval_documents=held_out,
        output_dir=workdir / "lapt",
        run_name=f"{config.name}-{model_dir.parent.name}",
        storage_path=config.lapt.storage_path or workdir / "ray",
        seed=config.seed,
        tracking_uri=tracker.tracking_uri,
        mlflow_run_id=run_id,
    )
    return result


__all__ = ["build_helper", "continue_pretraining", "initialise_method", "load_source_model", "load_source_tokenizer",
           "read_documents", "registered_model_name"]
