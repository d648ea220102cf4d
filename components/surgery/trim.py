"""Trim a checkpoint's vocabulary: the trimmed tokenizer (``components/tokenizers/trim.py``) and, by the streaming
checkpoint surgery, the embedding and LM-head rows of the kept tokens copied from the source.

A trim is a replacement whose target tokenizer is a subset of the source's: the plan maps every trimmed id to its
source id and initialises nothing, so the adapted matrices are the source rows of the kept tokens, in the new id
order, byte for byte. No padding rows are added: a zero head row would take probability mass from the kept tokens.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import dataclasses

from vocadapt.components.surgery.checkpoint import CheckpointWriting, adapt_checkpoint
from vocadapt.components.surgery.matrices import Initialisation
from vocadapt.components.surgery.plan import RowLayout
from vocadapt.components.tokenizers.saving import save_tokenizer


def trim_checkpoint(
    source_dir: str | Path,
    documents: Iterable[str],
    out_dir: str | Path,
    *,
    min_count: int | None = None,
    size: int | None = None,
    writing: CheckpointWriting = CheckpointWriting(),
) -> dict[str, Any]:
    """Write ``out_dir``: ``source_dir`` with its vocabulary trimmed to what ``documents`` use (see
    :func:`~vocadapt.components.tokenizers.trim.trim_tokenizer` for ``min_count`` / ``size``). Returns the record
    written to ``vocadapt_init.json`` (the plan, the trim's counts under ``trim``, and the parameter counts before
    and after, as ``vocadapt params`` gives them, under ``parameters``; ``writing.record_extra`` added)."""
    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer
    from vocadapt.components.tokenizers.params import load_model_config, vocabulary_change
    from vocadapt.components.tokenizers.trim import trim_tokenizer

    source_dir, out_dir = Path(source_dir), Path(out_dir)
    if out_dir.exists() and not writing.overwrite:
        raise ValueError(f"out_dir {out_dir} already exists; choose another out_dir or pass overwrite=True")
    trim = trim_tokenizer(load_pretrained_tokenizer(str(source_dir)), documents, min_count=min_count, size=size)
    parameters = vocabulary_change(load_model_config(source_dir), len(trim.tokenizer))
    staging = Path(tempfile.mkdtemp(prefix="vocadapt-trim-"))
    try:
        save_tokenizer(trim.tokenizer, staging)
        # "random" streams column blocks and draws nothing here: every row is copied
        record_extra = {"mode": "trim", "method": "copy", "target_tokenizer": "trimmed source tokenizer",
                        "trim": trim.record(), "parameters": parameters, **(writing.record_extra or {})}
        return adapt_checkpoint(
            source_dir, staging, out_dir, Initialisation("random"),
            layout=RowLayout("replace", target_to_source=trim.target_to_source),
            writing=dataclasses.replace(writing, record_extra=record_extra),
        )
    finally:
        shutil.rmtree(staging, ignore_errors=True)
