"""Merging an adapted model back into the chat model it came from (ElChat's post-hoc merge)."""

from vocadapt.components.merging.elchat import (
    DEFAULT_RATES, MergeSettings, StateDictLayout, lerp, merge_model_folders, merge_state_dicts, resolve_rates,
    restored_token_ids, slerp,
)

__all__ = ["DEFAULT_RATES", "MergeSettings", "StateDictLayout", "lerp", "merge_model_folders", "merge_state_dicts",
           "resolve_rates", "restored_token_ids", "slerp"]
