"""Loading models and tokenizers under the config's safety settings.

``trust_remote_code`` stays off unless the config opts in by name; weights load from safetensors only.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from vocadapt.platform.config import EMBEDDED_MODEL, ExperimentConfig


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

    from vocadapt.components.errors import UserError

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


def load_model(path: Path):
    """(model, tokenizer) from a folder: safetensors only, no remote code, eval mode, float32 on CPU."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, use_safetensors=True,
                                                 trust_remote_code=False)
    return model.eval(), tokenizer


def registered_model_name(config: ExperimentConfig) -> str:
    """``vocadapt-<lang>-<short model name>``, e.g. vocadapt-it-smollm2-135m."""
    if config.source.model == EMBEDDED_MODEL:
        short = "smollm2-135m"
    else:
        short = Path(config.source.model.rstrip("/")).name.lower()
    short = re.sub(r"[^a-z0-9.-]+", "-", short).strip("-")
    return f"vocadapt-{config.target.language}-{short}"


__all__ = ["load_model", "load_source_model", "load_source_tokenizer", "load_target_tokenizer",
           "registered_model_name"]
