"""Vocabulary surgery: give a model the target vocabulary, its new rows initialised by a registered method.

- :func:`adapt_embeddings`: in memory, for small models.
- :func:`adapt_checkpoint`: lazily on a safetensors checkpoint (reads only the embedding and head tensors), for
  models too big to load.
"""

from vocadapt.components.surgery.checkpoint import adapt_checkpoint
from vocadapt.components.surgery.matrices import Initialisation
from vocadapt.components.surgery.in_memory import adapt_embeddings, extra_heads_from_lm_head
from vocadapt.components.surgery.plan import RowLayout, VocabularyPlan, plan_vocabulary

__all__ = ["Initialisation", "RowLayout", "VocabularyPlan", "adapt_checkpoint", "adapt_embeddings", "extra_heads_from_lm_head", "plan_vocabulary"]
