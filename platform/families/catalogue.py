"""The committed catalogue of model families (``families.yaml``): tokenizer source, licence, architecture numbers."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from vocadapt.components.errors import UserError

CATALOGUE = Path(__file__).with_name("families.yaml")


@dataclass(frozen=True)
class ModelFamily:
    """One family: ``name`` is the catalogue key (``llama3_1``), ``hub_id`` the model the numbers come from."""

    name: str
    display: str
    hub_id: str
    card: str
    licence: str
    tokenizer: dict[str, Any]
    tokenizer_size: int
    architecture: dict[str, Any]

    @property
    def tokenizer_kind(self) -> str:
        """How a target tokenizer is trained ``like`` this family: ``bytelevel-bpe`` or ``spm-bpe``."""
        return self.tokenizer["kind"]

    @property
    def tied(self) -> bool:
        return bool(self.architecture.get("tie_word_embeddings", False))

    @property
    def vocab_rows(self) -> int:
        """Rows of the embedding matrix (``vocab_size`` in config.json; may exceed ``tokenizer_size``: padding)."""
        return int(self.architecture["vocab_size"])


@lru_cache(maxsize=1)
def _read() -> dict[str, Any]:
    return yaml.safe_load(CATALOGUE.read_text(encoding="utf-8"))


def family_names() -> tuple[str, ...]:
    return tuple(_read()["families"])


def model_family(name: str) -> ModelFamily:
    """The family called ``name`` (a catalogue key or its hub id); a UserError listing the known ones otherwise."""
    families = _read()["families"]
    for key, entry in families.items():
        if name in (key, entry["hub_id"]):
            return ModelFamily(name=key, **entry)
    raise UserError(f"unknown model family {name!r}; known: {', '.join(families)} "
                    f"(or their hub ids: {', '.join(entry['hub_id'] for entry in families.values())})")
