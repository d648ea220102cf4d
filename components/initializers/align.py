"""Align: the frequency-weighted mean over how a corpus tokenizes under both tokenizers ("0.01GB" §4.3).

Each sentence is tokenized by the target and by the source tokenizer. Every occurrence of a new target token is
mapped to the tuple of source tokens it aligns with in that sentence; the token's row is sum over its distinct tuples
of f_tuple * mean(rows of the tuple), with f the tuple's relative frequency (the frequencies are normalised to sum to
one, so the row stays on the scale of the source rows).

The defaults are the authors' (gucci-j/lowres-cve ``align_init.py``, checked against rows made by that code in
tests/initializers/test_authors_reference.py): a source token belongs to the tuple when its character span lies
inside the target token's span or contains it (``spans="contained"``), and a new token that never aligns keeps its
Merge row, as in their pipeline, where Merge runs first and Align overwrites the rows it can (``unseen="merge"``).
``spans="overlapping"`` (every source token whose span intersects the target token's) and ``unseen="fvt"`` are the
variants vocadapt shipped before; BENCHMARKS.md ("Initialiser defaults vs the authors' code") compares them.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

from vocadapt.components.initializers import InitProblem, register_initializer
from vocadapt.components.initializers._common import gathered_rows, ids_key
from vocadapt.components.last_result_cache import LastResultCache

_COUNTS = LastResultCache()


def _corpus_batches(files: list[str], max_lines: int, batch_size: int = 1024) -> Iterator[list[str]]:
    batch: list[str] = []
    seen = 0
    for file in files:
        with open(file, encoding="utf-8") as handle:
            for line in handle:
                line = line.rstrip("\n")
                if not line.strip():
                    continue
                batch.append(line)
                seen += 1
                if len(batch) == batch_size:
                    yield batch
                    batch = []
                if seen >= max_lines:
                    break
        if seen >= max_lines:
            break
    if batch:
        yield batch


def _encode_flat(tokenizer, texts: list[str], bases: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Token ids (T,) and character spans (T, 2) of a batch, spans shifted by each text's base offset so the
    whole batch reads as one text whose sentences never touch."""
    encoded = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
    lengths = np.array([len(ids) for ids in encoded["input_ids"]], dtype=np.int64)
    ids = np.fromiter(itertools.chain.from_iterable(encoded["input_ids"]), dtype=np.int64, count=int(lengths.sum()))
    spans = np.fromiter(
        itertools.chain.from_iterable(itertools.chain.from_iterable(encoded["offset_mapping"])),
        dtype=np.int64, count=2 * int(lengths.sum()),
    ).reshape(-1, 2)
    return ids, spans + np.repeat(bases, lengths)[:, None]


SPAN_RULES = ("contained", "overlapping")


def aligned_runs(target_spans: np.ndarray, source_spans: np.ndarray, spans: str) -> tuple[np.ndarray, np.ndarray]:
    """For each target span [a, b) (T, 2), the first and last index of the source tokens aligned with it (a run,
    empty when last < first), source spans [c, d) (S, 2) coming in order.

    "contained" (lowres-cve's ``create_mapping_dict``): the source tokens inside [a, b) (a <= c and d <= b), or, when
    there are none, those that contain it (c <= a and b <= d); a source token that straddles the target token's edge
    belongs to neither, so an occurrence may align with nothing. "overlapping": every source token whose span
    intersects [a, b) (c < b and d > a). Each run is found by two binary searches.
    """
    starts, ends = source_spans[:, 0], source_spans[:, 1]
    if spans == "overlapping":
        return (np.searchsorted(ends, target_spans[:, 0], side="right"),
                np.searchsorted(starts, target_spans[:, 1], side="left") - 1)
    first = np.searchsorted(starts, target_spans[:, 0], side="left")
    last = np.searchsorted(ends, target_spans[:, 1], side="right") - 1
    outer = last < first  # nothing inside: the source token(s) around the target token, if any
    first[outer] = np.searchsorted(ends, target_spans[outer, 1], side="left")
    last[outer] = np.searchsorted(starts, target_spans[outer, 0], side="right") - 1
    return first, last


def batch_alignments(target, source, slot: np.ndarray, spans: str = "contained"):
    """(slot, source id, weight) for every occurrence of a new token in a batch, and the occurrences' slots.

    The source tokens of an occurrence are a run of consecutive source tokens (:func:`aligned_runs`). Each
    occurrence spreads weight one over its tuple (1/|tuple| per piece), which makes the final division by the
    occurrence count a mean; an occurrence with an empty tuple does not count.
    """
    (target_ids, target_spans), (source_ids, source_spans) = target, source
    slots = slot[target_ids]
    chosen = slots >= 0
    if not chosen.any() or not len(source_ids):
        return None
    first, last = aligned_runs(target_spans[chosen], source_spans, spans)
    valid = last >= first
    if not valid.any():
        return None
    first, last, occurrence_slots = first[valid], last[valid], slots[chosen][valid]
    lengths = last - first + 1
    starts = np.repeat(first - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
    return np.repeat(occurrence_slots, lengths), source_ids[starts], np.repeat(1.0 / lengths, lengths), occurrence_slots


def alignment_weights(problem: InitProblem, max_lines: int, spans: str = "contained"
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """Sparse (N, V_source_rows) mixing weights whose rows sum to one, and (N,) occurrence counts."""
    from tqdm.auto import tqdm

    new_ids = problem.new_target_ids.numpy()
    slot = np.full(max(int(new_ids.max(initial=0)) + 1, len(problem.target_tokenizer)) + 1, -1, dtype=np.int64)
    slot[new_ids] = np.arange(len(new_ids))
    rows_parts, cols_parts, weight_parts = [], [], []
    occurrences = np.zeros(len(new_ids), dtype=np.float64)
    files = [str(Path(file)) for file in problem.corpus_files]
    for batch in tqdm(_corpus_batches(files, max_lines), desc="align: tokenizing corpus", unit="batch", leave=False):
        lengths = np.array([len(text) + 1 for text in batch], dtype=np.int64)
        bases = np.cumsum(lengths) - lengths
        found = batch_alignments(
            _encode_flat(problem.target_tokenizer, batch, bases), _encode_flat(problem.source_tokenizer, batch, bases),
            slot, spans,
        )
        if found is not None:
            rows_parts.append(found[0])
            cols_parts.append(found[1])
            weight_parts.append(found[2])
            occurrences += np.bincount(found[3], minlength=len(new_ids))
    size = (len(new_ids), problem.source_matrix.shape[0])
    if not rows_parts:
        return torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0), size), torch.zeros(len(new_ids))
    rows = np.concatenate(rows_parts)
    weights = np.concatenate(weight_parts) / occurrences[rows]
    indices = torch.from_numpy(np.stack([rows, np.concatenate(cols_parts)]))
    matrix = torch.sparse_coo_tensor(indices, torch.from_numpy(weights).float(), size, check_invariants=True).coalesce()
    return matrix, torch.from_numpy(occurrences)


def aligned_mix(problem: InitProblem, weights: torch.Tensor) -> torch.Tensor:
    """(N, hidden) = weights @ source rows, reading only the source rows some weight uses (float32): the sparse
    matrix's columns renumbered into them keep their order, so each row sums the same terms in the same order."""
    indices = weights.indices()
    if indices.shape[1] == 0:
        return torch.zeros(weights.shape[0], problem.source_matrix.shape[1], dtype=torch.float32)
    used_rows, columns = gathered_rows(problem, indices[1])
    compact = torch.sparse_coo_tensor(torch.stack([indices[0], columns]), weights.values(),
                                      (weights.shape[0], used_rows.shape[0]), is_coalesced=True, check_invariants=True)
    return torch.sparse.mm(compact, used_rows)


UNSEEN_RULES = ("merge", "fvt")


@register_initializer("align", columnwise=True)
def align(
    problem: InitProblem, *, max_lines: int = 200_000, spans: str = "contained", unseen: str = "merge"
) -> torch.Tensor:
    """(N, hidden) frequency-weighted means of aligned source pieces.

    max_lines: at most this many non-empty corpus lines are tokenized (the counts converge long before).
    spans: which source tokens an occurrence aligns with, "contained" (the authors') or "overlapping"; see
        :func:`aligned_runs`.
    unseen: the row of a new token that never aligns: "merge" (the authors': its Merge row, computed with every new
        token, as their pipeline runs Merge first) or "fvt" (its FVT row).
    """
    if spans not in SPAN_RULES or unseen not in UNSEEN_RULES:
        raise ValueError(f"align needs spans {'|'.join(SPAN_RULES)} and unseen {'|'.join(UNSEEN_RULES)}, "
                         f"got spans={spans!r}, unseen={unseen!r}")
    if not problem.corpus_files:
        raise ValueError(
            "initialiser 'align' needs target-language text to align on and got no corpus_files; pass the "
            "training corpus (corpus_files=...) or choose 'fvt', which needs none"
        )
    key = (ids_key(problem.new_target_ids), tuple(problem.corpus_files), max_lines, problem.source_matrix.shape[0],
           spans)
    weights, occurrences = _COUNTS.get(
        (problem.source_tokenizer, problem.target_tokenizer), key, lambda: alignment_weights(problem, max_lines, spans)
    )
    rows = aligned_mix(problem, weights)
    never = occurrences == 0
    if bool(never.any()):
        if unseen == "merge":
            from vocadapt.components.initializers.merge import merge

            rows[never] = merge(problem)[never]
        else:
            from vocadapt.components.initializers.fvt import fvt

            rows[never] = fvt(dataclasses.replace(problem, new_target_ids=problem.new_target_ids[never]))
    return rows
