"""Merging an adapted model back into the chat model it came from (ElChat's post-hoc merge).

The merge's names load on first use (PEP 562), so reading :class:`MergeSettings` (the config does) imports no torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from vocadapt.components.merging.settings import DEFAULT_RATES, MergeSettings

_MERGE_NAMES = {"StateDictLayout", "lerp", "merge_model_folders", "merge_state_dicts", "resolve_rates",
                "restored_token_ids", "slerp"}

__all__ = ["DEFAULT_RATES", "MergeSettings", *sorted(_MERGE_NAMES)]


def __getattr__(name: str) -> Any:
    if name in _MERGE_NAMES:
        return getattr(importlib.import_module("vocadapt.components.merging.elchat"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
