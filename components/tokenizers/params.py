"""Parameter counts before and after a vocabulary change (SAVA §4.1, Table 1).

The model is built on PyTorch's meta device from its config, so the count is exact for any architecture
transformers knows (tied or untied heads, biases, norms) and costs no memory: an 8B model takes a second.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ParameterCount:
    """Parameters of a model: all of them, the input embeddings, the LM head (0 when tied) and the rest."""

    vocab_size: int
    hidden_size: int
    tied: bool
    total: int
    embeddings: int
    lm_head: int
    body: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_model_config(path: str | Path):
    """A transformers config from a ``config.json`` file or a folder holding one (offline, no remote code)."""
    from transformers import AutoConfig

    from vocadapt.components.input_files import read_json

    path = Path(path)
    fix = "pass a model's config.json (a JSON object with model_type) or its folder"
    if path.is_dir() and (path / "config.json").is_file():
        read_json(path / "config.json", "--config", fix)  # a syntax error named with its file and line
        return AutoConfig.from_pretrained(str(path), trust_remote_code=False)
    if not path.is_file():
        raise FileNotFoundError(f"no model config at {path}; pass a config.json or a model folder")
    data = read_json(path, "--config", fix)
    if not isinstance(data, dict):
        raise ValueError(f"--config {path} holds a JSON {type(data).__name__}, not an object; {fix}")
    model_type = data.pop("model_type", None)
    if model_type is None:
        raise ValueError(f"{path} has no model_type; add one (e.g. \"llama\") or pass the model's config.json")
    return AutoConfig.for_model(model_type, **data)


def count_parameters(config: Any, vocab_size: int | None = None) -> ParameterCount:
    """Count the parameters of the causal LM described by ``config`` (optionally with another vocabulary size)."""
    import torch
    from transformers import AutoModelForCausalLM

    config = copy.deepcopy(config)
    if vocab_size is not None:
        config.vocab_size = vocab_size
        pad = getattr(config, "pad_token_id", None)
        if isinstance(pad, int) and pad >= vocab_size:  # a smaller vocabulary renumbers the pad token (Qwen3's is
            config.pad_token_id = None  # 151,643); the count does not depend on where it sits
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, trust_remote_code=False)
    embeddings = model.get_input_embeddings().weight
    head = model.get_output_embeddings()
    tied = head is None or head.weight is embeddings
    head_count = 0 if tied else sum(p.numel() for p in head.parameters())
    total = sum(p.numel() for p in model.parameters())  # shared (tied) tensors are yielded once
    return ParameterCount(
        vocab_size=config.vocab_size,
        hidden_size=embeddings.shape[1],
        tied=tied,
        total=total,
        embeddings=embeddings.numel(),
        lm_head=head_count,
        body=total - embeddings.numel() - head_count,
    )


def vocabulary_change(config: Any, vocab_size: int) -> dict[str, Any]:
    """Counts before and after replacing the vocabulary with one of ``vocab_size`` tokens, and the difference."""
    before = count_parameters(config)
    after = count_parameters(config, vocab_size)
    return {
        "before": before.as_dict(),
        "after": after.as_dict(),
        "change": after.total - before.total,
        "change_percent": 100.0 * (after.total - before.total) / before.total,
    }
