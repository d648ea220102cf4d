"""Language-adaptive continued pre-training (LAPT): data mixing and packing, strategies, the loop.

    from vocadapt.components.training import LaptData, LaptSettings, train_lapt
    data = LaptData.from_files(target=["it.txt"], source=["en.txt"])
    # or a Hugging Face dataset per stream, streamed and resumable from the exact document:
    data = LaptData.from_sources({"source": ["en.txt"]},
                                 {"target": DatasetSource("uonlp/CulturaX", "it", streaming=True)})
    result = train_lapt(model, tokenizer, data, LaptSettings(max_steps=10), hooks=LaptHooks(logger=logger),
                        runtime=LaptRuntime(eval_documents={"target": it_held_out, "source": en_held_out}))

The settings and dataset sources are imported here; the rest (data, engine, loop, strategies: torch) load on first
use (PEP 562), so the config, which reads the settings, imports no torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from vocadapt.components.training.documents import DatasetSource, load_dataset_documents
from vocadapt.components.training.settings import OBJECTIVES, STRATEGIES, LaptSettings

_LAZY_NAMES = {
    "data": ("LaptData", "PackedBatch", "PackedMixture", "read_documents"),
    "engine": ("EngineFactory", "EngineSpec", "TorchEngine", "TrainingEngine"),
    "loop": ("LaptHooks", "LaptResult", "LaptRuntime", "train_lapt"),
    "strategies": ("count_parameters", "plan_stages"),
}
_MODULE_OF = {name: module for module, names in _LAZY_NAMES.items() for name in names}

__all__ = ["OBJECTIVES", "STRATEGIES", "DatasetSource", "LaptSettings", "load_dataset_documents", *sorted(_MODULE_OF)]


def __getattr__(name: str) -> Any:
    if name in _MODULE_OF:
        return getattr(importlib.import_module(f"vocadapt.components.training.{_MODULE_OF[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
