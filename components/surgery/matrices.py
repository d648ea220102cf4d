"""Build one adapted matrix (input embeddings or LM head) from its own source matrix.

An untied LM head (Llama-3.1-8B, Mistral-7B) gets its new rows from the source head, never from the input embeddings.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from vocadapt.components.initializers import InitProblem, get_initializer
from vocadapt.components.surgery.plan import VocabularyPlan


def check_method(method: str, options: dict[str, Any] | None, helper: Any) -> None:
    """Fail before any work: unknown method, unknown option, or a helper-needing method without a helper."""
    entry = get_initializer(method)
    entry.check_options(options or {})
    if entry.needs_helper and helper is None:
        accepted = ", ".join(entry.helpers) or "a helper"
        raise ValueError(
            f"initialiser {method!r} needs a helper ({accepted}) and none was given; pass --helper fasttext "
            "(trained on the corpus), --helper model:DIR (a model using the target tokenizer) or --helper "
            "vectors:FILE.vec, or choose a method without a helper (random, multivariate, random_token, fvt, "
            "merge, align)"
        )


def initialise_rows(
    source_matrix: torch.Tensor,
    plan: VocabularyPlan,
    method: str,
    *,
    role: str,
    source_tokenizer: Any,
    target_tokenizer: Any,
    options: dict[str, Any] | None = None,
    seed: int = 0,
    helper: Any = None,
    corpus_files: list[str] | tuple[str, ...] = (),
) -> torch.Tensor:
    """(N, hidden) float32 rows for ``plan.new_target_ids``, checked for shape and finiteness.

    Each role gets a generator seeded with ``seed``, so a tied and an untied model draw the same random choices.
    """
    entry = get_initializer(method)
    problem = InitProblem(
        source_matrix=source_matrix if source_matrix.dtype == torch.float32 else source_matrix.float(),
        new_target_ids=plan.new_target_ids,
        overlap=plan.target_to_source,
        source_tokenizer=source_tokenizer,
        target_tokenizer=target_tokenizer,
        role=role,
        generator=torch.Generator().manual_seed(seed),
        helper=helper,
        corpus_files=[str(file) for file in corpus_files],
    )
    rows = entry.function(problem, **(options or {}))
    expected = (len(plan.new_target_ids), source_matrix.shape[1])
    if tuple(rows.shape) != expected:
        raise RuntimeError(f"initialiser {method!r} returned {tuple(rows.shape)} rows for {role}, expected {expected}")
    if not bool(torch.isfinite(rows).all()):
        raise RuntimeError(f"initialiser {method!r} produced non-finite values for {role}")
    return rows


def assemble_matrix(
    source_matrix: torch.Tensor, plan: VocabularyPlan, new_rows: torch.Tensor, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """(plan.rows, hidden) in ``dtype`` (default: the source's): shared rows copied bit for bit, new rows placed,
    padding kept. A float32 copy of a bf16/fp16 source may be passed with the original dtype: the round trip
    through float32 is exact, so shared rows stay bit-identical.

    Expansion keeps every source row at its index (padding rows included); rows that are neither shared, new nor
    kept padding are zero.
    """
    out = torch.zeros(plan.rows, source_matrix.shape[1], dtype=dtype or source_matrix.dtype)
    if plan.mode == "expand":
        kept = min(plan.rows, source_matrix.shape[0])
        out[:kept] = source_matrix[:kept].to(out.dtype)
    if plan.target_to_source:
        targets = torch.tensor(list(plan.target_to_source), dtype=torch.long)
        sources = torch.tensor(list(plan.target_to_source.values()), dtype=torch.long)
        out[targets] = source_matrix[sources].to(out.dtype)
    if len(plan.new_target_ids):
        out[plan.new_target_ids] = new_rows.to(out.dtype)
    return out


def adapt_matrix(
    source_matrix: torch.Tensor, plan: VocabularyPlan, method: str, *, dtype: torch.dtype | None = None, **kwargs: Any
) -> tuple[torch.Tensor, float]:
    """The adapted (plan.rows, hidden) matrix (in ``dtype``, default the source's) and the seconds the method took."""
    started = time.perf_counter()
    rows = initialise_rows(source_matrix, plan, method, **kwargs)
    seconds = time.perf_counter() - started
    return assemble_matrix(source_matrix, plan, rows, dtype), seconds
