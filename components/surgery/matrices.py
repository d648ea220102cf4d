"""Build one adapted matrix (input embeddings or LM head) from its own source matrix.

An untied LM head (Llama-3.1-8B, Mistral-7B) gets its new rows from the source head, never from the input embeddings.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from vocadapt.components.initializers import ConfiguredInitializer, InitProblem
from vocadapt.components.surgery.plan import VocabularyPlan


@dataclass(frozen=True)
class Initialisation:
    """How a surgery's new rows are set: the method (a registered name, looked up with ``options``, or one the
    caller configured once with ``configure_initializer``), the seed of its generator, its helper (a
    :class:`~vocadapt.components.helpers.TokenVectors`, or for a checkpoint surgery a spec string) and the
    target-language corpus it may read."""

    method: str | ConfiguredInitializer
    options: dict[str, Any] | None = None
    seed: int = 0
    helper: Any = None
    corpus_files: list[str] | tuple[str, ...] = ()


@dataclass(frozen=True)
class InitInputs:
    """What a configured method reads beside its source matrix: both tokenizers, and the seed, helper (resolved)
    and corpus of the :class:`Initialisation`."""

    source_tokenizer: Any
    target_tokenizer: Any
    seed: int = 0
    helper: Any = None
    corpus_files: list[str] | tuple[str, ...] = ()


def _problem(source_matrix: Any, plan: VocabularyPlan, method: ConfiguredInitializer, inputs: InitInputs, *,
             role: str, columns: tuple[int, int] | None = None) -> InitProblem:
    # the matrix as it is (bf16 at 8B scale): each method reads the rows it needs as float32 (InitProblem)
    return InitProblem(
        source_matrix=source_matrix,
        new_target_ids=plan.new_target_ids,
        overlap=plan.target_to_source,
        source_tokenizer=inputs.source_tokenizer,
        target_tokenizer=inputs.target_tokenizer,
        role=role,
        generator=torch.Generator().manual_seed(inputs.seed),
        helper=inputs.helper,
        corpus_files=[str(file) for file in inputs.corpus_files],
        columns=columns,
        notes=method.notes,
    )


def _check(rows: torch.Tensor, method: ConfiguredInitializer, role: str, expected: tuple[int, int]) -> torch.Tensor:
    if tuple(rows.shape) != expected:
        raise RuntimeError(f"initialiser {method.name!r} returned {tuple(rows.shape)} rows for {role}, expected {expected}")
    if not bool(torch.isfinite(rows).all()):
        raise RuntimeError(f"initialiser {method.name!r} produced non-finite values for {role}")
    return rows


def initialise_rows(
    source_matrix: torch.Tensor,
    plan: VocabularyPlan,
    method: ConfiguredInitializer,
    inputs: InitInputs,
    *,
    role: str,
    columns: tuple[int, int] | None = None,
) -> torch.Tensor:
    """(N, hidden) float32 rows for ``plan.new_target_ids``, checked for shape and finiteness.

    columns: (first column, full hidden size) when ``source_matrix`` is a column block (streamed surgery).

    method: resolved once by the caller (``configure_initializer``), options checked. Each role gets a generator
    seeded with ``inputs.seed``, so a tied and an untied model draw the same random choices.
    """
    problem = _problem(source_matrix, plan, method, inputs, role=role, columns=columns)
    return _check(method(problem), method, role, (len(plan.new_target_ids), source_matrix.shape[1]))


def initialise_row_blocks(
    source_rows: Any, plan: VocabularyPlan, method: ConfiguredInitializer, inputs: InitInputs, *, role: str
) -> Iterator[torch.Tensor]:
    """A ``row_blocks`` method's rows for ``plan.new_target_ids`` as consecutive float32 row blocks, each checked
    for width and finiteness, and their count checked at the end; ``source_rows`` is a tensor or a
    :class:`~vocadapt.components.initializers.SourceRows` (the rows stay on disk). The problem is the one
    :func:`initialise_rows` builds, so the blocks concatenate to its rows byte for byte."""
    built = _problem(source_rows, plan, method, inputs, role=role)
    hidden, done = source_rows.shape[1], 0
    for block in method.blocks(built):
        yield _check(block, method, role, (block.shape[0], hidden))
        done += block.shape[0]
    if done != len(plan.new_target_ids):
        raise RuntimeError(f"initialiser {method.name!r} returned {done} rows for {role}, "
                           f"expected {len(plan.new_target_ids)}")


# Shared rows gathered and placed at once: 8,192 x 4,096 bf16 rows is 64 MiB, however large the overlap.
COPY_CHUNK_ROWS = 8192


def assemble_matrix(
    source_matrix: torch.Tensor, plan: VocabularyPlan, new_rows: torch.Tensor, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """(plan.rows, hidden) in ``dtype`` (default: the source's): shared rows copied bit for bit, new rows placed,
    padding kept. A float32 copy of a bf16/fp16 source may be passed with the original dtype: the round trip
    through float32 is exact, so shared rows stay bit-identical.

    Expansion keeps every source row at its index (padding rows included); rows that are neither shared, new nor
    kept padding are zero. Besides the result, it holds COPY_CHUNK_ROWS gathered rows at a time: an expansion's
    shared tokens keep their ids, and those rows are already in place with the kept ones (no 128,256-row gather).
    """
    out = torch.empty(plan.rows, source_matrix.shape[1], dtype=dtype or source_matrix.dtype)
    kept = min(plan.rows, source_matrix.shape[0]) if plan.mode == "expand" else 0
    out[:kept] = source_matrix[:kept]
    out[kept:] = 0
    if plan.target_to_source:
        targets = torch.tensor(list(plan.target_to_source), dtype=torch.long)
        sources = torch.tensor(list(plan.target_to_source.values()), dtype=torch.long)
        moved = (targets != sources) | (targets >= kept)
        targets, sources = targets[moved], sources[moved]
        for first in range(0, len(targets), COPY_CHUNK_ROWS):
            chunk = slice(first, first + COPY_CHUNK_ROWS)
            out[targets[chunk]] = source_matrix[sources[chunk]].to(out.dtype)
    if len(plan.new_target_ids):
        out[plan.new_target_ids] = new_rows.to(out.dtype)
    return out


def adapt_matrix(
    source_matrix: torch.Tensor, plan: VocabularyPlan, method: ConfiguredInitializer, inputs: InitInputs, *,
    role: str, dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, float]:
    """The adapted (plan.rows, hidden) matrix (in ``dtype``, default the source's) and the seconds the method took."""
    started = time.perf_counter()
    rows = initialise_rows(source_matrix, plan, method, inputs, role=role)
    seconds = time.perf_counter() - started
    return assemble_matrix(source_matrix, plan, rows, dtype), seconds
