"""Language-adaptive continued pre-training (LAPT): data mixing and packing, strategies, the loop.

    from vocadapt.components.training import LaptData, LaptSettings, train_lapt
    data = LaptData.from_files(target=["it.txt"], source=["en.txt"])
    # or a Hugging Face dataset per stream, streamed and resumable from the exact document:
    data = LaptData.from_sources({"source": ["en.txt"]},
                                 {"target": DatasetSource("uonlp/CulturaX", "it", streaming=True)})
    result = train_lapt(model, tokenizer, data, LaptSettings(max_steps=10), hooks=LaptHooks(logger=logger),
                        runtime=LaptRuntime(eval_documents={"target": it_held_out, "source": en_held_out}))
"""

from vocadapt.components.training.data import LaptData, PackedBatch, PackedMixture, read_documents
from vocadapt.components.training.documents import DatasetSource, load_dataset_documents
from vocadapt.components.training.engine import EngineFactory, EngineSpec, TorchEngine, TrainingEngine
from vocadapt.components.training.loop import LaptHooks, LaptResult, LaptRuntime, train_lapt
from vocadapt.components.training.settings import OBJECTIVES, STRATEGIES, LaptSettings
from vocadapt.components.training.strategies import count_parameters, plan_stages

__all__ = [
    "OBJECTIVES", "STRATEGIES", "DatasetSource", "EngineFactory", "EngineSpec", "LaptData", "LaptHooks", "LaptResult",
    "LaptRuntime", "LaptSettings", "PackedBatch", "PackedMixture", "TorchEngine", "TrainingEngine", "count_parameters",
    "load_dataset_documents", "plan_stages", "read_documents", "train_lapt",
]
