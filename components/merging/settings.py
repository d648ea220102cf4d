"""What ElChat's post-hoc merge is asked to do (:class:`MergeSettings`), apart from the merge itself.

Torch-free, so that the config (``platform/config``, the ``merge`` section) reads it without importing torch.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from vocadapt.components.typed_settings import StrictSettings

DEFAULT_RATES: dict[int, float] = {0: 0.3, 1: 0.5, -2: 0.5, -1: 0.3}


class MergeSettings(StrictSettings):
    """What the merge does; the component reads nothing else."""

    method: Literal["none", "elchat-slerp", "elchat-linear"] = Field(
        "none", description="Merge the adapted model back into the source chat model after LAPT (ElChat, "
        "../shared/papers §4), before evaluation and registration: 'elchat-slerp' (ElChat's final choice) or "
        "'elchat-linear' interpolate the layers of `rates`; 'none' keeps the adapted model. Expansion only.",
    )
    rates: dict[int, float] = Field(
        default_factory=lambda: dict(DEFAULT_RATES),
        description="Decoder layer -> the chat model's share t in [0, 1] of that layer's weights (0: the adapted "
        "model's, 1: the chat model's); negative layers count from the last (-1 is the last layer).",
    )
    restore_added_tokens: bool = Field(
        False, description="Restore the chat model's rows of every added token of its tokenizer (e.g. Llama-3.1's "
        "header tokens), not only of its special tokens.",
    )
    unmerged_layers: Literal["adapted", "chat"] = Field(
        "adapted", description="Where the decoder layers outside `rates` come from: 'adapted' (LAPT's training "
        "kept) or 'chat' (ElChat's start from the chat model; the same under its 2x2LS training).",
    )

    @field_validator("rates")
    @classmethod
    def _shares(cls, rates: dict[int, float]) -> dict[int, float]:
        bad = {layer: t for layer, t in rates.items() if not 0.0 <= t <= 1.0}
        if bad:
            raise ValueError(f"rates {bad} are outside [0, 1]; t is the chat model's share of a layer")
        if not rates:
            raise ValueError("rates is empty; give at least one layer, e.g. {0: 0.3, 1: 0.5, -2: 0.5, -1: 0.3}")
        return rates

    @property
    def interpolation(self) -> str:
        return self.method.removeprefix("elchat-")
