"""Merge: the hierarchical mean along the target tokenizer's merge rules ("0.01GB" §4.3 and Algorithm 1).

A new token t built by the merge (t1, t2) gets (h(t1) + h(t2)) / 2, where h of a shared token is its source row and
h of another new token is that token's own hierarchical mean, recursively. A new token that no merge builds (a base
character, every token of a Unigram model) or whose merge uses a part with no row gets its FVT row instead.
"""

from __future__ import annotations

import dataclasses

import torch

from vocadapt.components.collector import parse_json
from vocadapt.components.initializers import InitProblem, register_initializer
from vocadapt.components.last_result_cache import LastResultCache


def _merge_pairs(merges: list) -> list[tuple[str, str]]:
    """Merges as pairs; tokenizers stores them as pairs or as "a b" strings (Llama-3's may hold a space inside a part,
    so a string is split only when it has exactly one space)."""
    pairs = []
    for merge in merges:
        if isinstance(merge, (list, tuple)) and len(merge) == 2:
            pairs.append((merge[0], merge[1]))
        elif isinstance(merge, str) and merge.count(" ") == 1:
            left, right = merge.split(" ")
            pairs.append((left, right))
    return pairs


# The target's BPE vocabulary and merges, parsed from its backend JSON once for both roles of an untied model (and for
# align's unseen tokens): 0.8 s a parse for Gemma-3's 262K tokens.
_BPE_MODELS = LastResultCache()


def _bpe_model(target_tokenizer) -> tuple[dict[str, int], list[tuple[str, str]]] | None:
    """(vocabulary, merge pairs) of the target's backend model; None when it is not a BPE."""

    def parse() -> tuple[dict[str, int], list[tuple[str, str]]] | None:
        model = parse_json(target_tokenizer.backend_tokenizer.to_str())["model"]
        if model.get("type") != "BPE":
            return None
        return model["vocab"], _merge_pairs(model.get("merges", []))

    return _BPE_MODELS.get((target_tokenizer,), len(target_tokenizer), parse)


def merge_tree(target_tokenizer, new_ids: set[int], known_ids: set[int]) -> dict[int, tuple[int, int]]:
    """new target id -> (left id, right id) of the first (highest-priority) merge that produces it.

    Both parts must be shared (``known_ids``) or new tokens; merges of a byte-level and of a sentencepiece BPE are
    read from the backend JSON in the tokenizer's own spelling, so parts and results are looked up in one vocabulary.
    """
    model = _bpe_model(target_tokenizer)
    if model is None:
        return {}
    vocab, pairs = model
    producers: dict[int, tuple[int, int]] = {}
    for left, right in pairs:
        result = vocab.get(left + right)
        if result is None or result not in new_ids or result in producers:
            continue
        left_id, right_id = vocab.get(left), vocab.get(right)
        if left_id is None or right_id is None:
            continue
        if all(part in known_ids or part in new_ids for part in (left_id, right_id)):
            producers[result] = (left_id, right_id)
    return producers


def _depths(producers: dict[int, tuple[int, int]], resolvable: set[int]) -> dict[int, int]:
    """Depth in the merge tree of each new token whose whole tree bottoms out in shared or fallback tokens."""
    depth: dict[int, int] = {}
    # Children are strictly shorter strings than their parent, so sorting by the chain length is a valid order:
    # we iterate until nothing changes, which takes at most (longest chain) passes over the producers.
    pending = dict(producers)
    while pending:
        progressed = False
        for token, (left, right) in list(pending.items()):
            parts = [0 if part in resolvable else depth.get(part) for part in (left, right)]
            if all(part is not None for part in parts):
                depth[token] = 1 + max(parts)
                del pending[token]
                progressed = True
        if not progressed:
            break
    return depth


@register_initializer("merge", columnwise=True)
def merge(problem: InitProblem) -> torch.Tensor:
    """(N, hidden): hierarchical means along the merge tree, computed one tree level at a time (batched)."""
    from vocadapt.components.initializers.fvt import fvt

    new_ids = problem.new_target_ids.tolist()
    position = {token: index for index, token in enumerate(new_ids)}
    overlap = {t: s for t, s in problem.overlap.items() if 0 <= s < problem.source_matrix.shape[0]}
    producers = merge_tree(problem.target_tokenizer, set(position), set(overlap))
    fallback = [token for token in new_ids if token not in producers]
    depth = _depths(producers, set(overlap) | set(fallback))
    fallback += [token for token in producers if token not in depth]  # trees that never bottom out
    rows = torch.empty(len(new_ids), problem.source_matrix.shape[1], dtype=torch.float32)
    if fallback:
        fallback_problem = dataclasses.replace(problem, new_target_ids=torch.tensor(fallback, dtype=torch.long))
        rows[[position[token] for token in fallback]] = fvt(fallback_problem)
    source = problem.source_matrix
    for level in range(1, max(depth.values(), default=0) + 1):
        tokens = [token for token, token_depth in depth.items() if token_depth == level]
        halves = []
        for side in (0, 1):
            parts = [producers[token][side] for token in tokens]
            is_new = torch.tensor([part in position and part not in overlap for part in parts])
            new_part_rows = rows[[position.get(part, 0) for part in parts]]
            source_part_rows = source[[overlap.get(part, 0) for part in parts]].float()
            halves.append(torch.where(is_new.unsqueeze(1), new_part_rows, source_part_rows))
        rows[[position[token] for token in tokens]] = (halves[0] + halves[1]) / 2
    return rows
