"""How alike two embedding spaces are, through relative representations (SAVA §6; Moschella et al., 2023).

Each token's embedding is replaced by its cosine similarity to a fixed set of anchor tokens (the same tokens in
both spaces), which makes the representation invariant to rotations and rescaling of the space. The similarity of
two models is the mean, over the tokens they share, of the cosine between a token's two relative representations,
as a percentage. SAVA draws 128 anchors among word-initial ("prefix") tokens and 128 among the others.

:func:`relative_representation` computes what latentis's ``cosine_proj`` does (normalise, then project on the
anchors); it is written out here because importing latentis pulls lightning and takes ~30 s on 2 cores.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from vocadapt.components.tokenizers.canonical import canonical_tokens

ANCHORS_PER_KIND = 128


def choose_anchors(
    candidate_ids: Sequence[int], word_start: Mapping[int, bool], *, per_kind: int = ANCHORS_PER_KIND, seed: int = 0
) -> list[int]:
    """``per_kind`` word-initial and ``per_kind`` other token ids drawn from ``candidate_ids`` (sorted, deduped).

    Raises ValueError when either kind has fewer than ``per_kind`` candidates (lower ``per_kind`` for tiny
    vocabularies). The result is sorted, and the same for the same candidates and seed.
    """
    candidates = sorted(set(candidate_ids))
    rng = random.Random(seed)
    anchors: list[int] = []
    for kind in (True, False):
        pool = [token for token in candidates if word_start[token] is kind]
        if len(pool) < per_kind:
            label = "word-initial" if kind else "non-initial"
            raise ValueError(
                f"only {len(pool)} {label} tokens to draw {per_kind} anchors from: lower anchors per kind "
                f"(at most {len(pool)}) or compare models with larger shared vocabularies"
            )
        anchors.extend(rng.sample(pool, per_kind))
    return sorted(anchors)


def relative_representation(embeddings: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of every row to every anchor.

    Args:
        embeddings: [tokens, hidden].
        anchors: [anchors, hidden], rows of the same space.

    Returns:
        [tokens, anchors], in float32.
    """
    rows = F.normalize(embeddings.float(), p=2, dim=-1)
    return rows @ F.normalize(anchors.float(), p=2, dim=-1).T


def embedding_similarity(
    first: torch.Tensor, second: torch.Tensor, anchor_rows: Sequence[int], token_rows: Sequence[int] | None = None
) -> float:
    """SAVA §6 similarity (0-100) of two embedding matrices whose rows are already aligned token by token.

    Args:
        first: [tokens, hidden_a] embeddings of model A.
        second: [tokens, hidden_b] embeddings of model B, row i the same token as row i of ``first``
            (the hidden sizes may differ: only the relative representations are compared).
        anchor_rows: rows used as anchors, in both matrices.
        token_rows: rows compared (default: all).
    """
    if first.shape[0] != second.shape[0]:
        raise ValueError(f"the matrices have {first.shape[0]} and {second.shape[0]} rows: align them token by token")
    rows = torch.arange(first.shape[0]) if token_rows is None else torch.as_tensor(list(token_rows))
    anchors = torch.as_tensor(list(anchor_rows))
    relative_first = relative_representation(first[rows], first[anchors])
    relative_second = relative_representation(second[rows], second[anchors])
    return 100.0 * F.cosine_similarity(relative_first, relative_second, dim=-1).mean().item()


def similarity_matrix(
    spaces: Mapping[str, torch.Tensor], anchor_rows: Sequence[int], token_rows: Sequence[int] | None = None
) -> tuple[list[str], list[list[float]]]:
    """Pairwise :func:`embedding_similarity` of named, row-aligned matrices: (names, symmetric matrix)."""
    names = list(spaces)
    matrix = [[100.0] * len(names) for _ in names]
    for i, a in enumerate(names):
        for j in range(i + 1, len(names)):
            value = embedding_similarity(spaces[a], spaces[names[j]], anchor_rows, token_rows)
            matrix[i][j] = matrix[j][i] = value
    return names, matrix

@dataclass(frozen=True)
class SimilarityTable:
    names: list[str]
    matrix: list[list[float]]  # [models, models], 0-100, symmetric
    anchors: int
    tokens: int

    def as_dict(self) -> dict:
        return {"names": self.names, "matrix": self.matrix, "anchors": self.anchors, "tokens_compared": self.tokens}

    def pairs(self) -> dict[str, float]:
        """``{"<a>__<b>": similarity}`` for each unordered pair, for MLflow metrics."""
        return {f"{a}__{b}": self.matrix[i][j] for i, a in enumerate(self.names)
                for j, b in enumerate(self.names) if i < j}


def input_embeddings(model) -> torch.Tensor:
    """[rows, hidden] input embedding matrix, detached, float32."""
    return model.get_input_embeddings().weight.detach().float()


def compare_embeddings(
    models: Mapping[str, tuple[torch.Tensor, object]], *, anchors_per_kind: int = 128, seed: int = 0
) -> SimilarityTable:
    """``models``: name -> (embeddings [rows, hidden], tokenizer). Shared tokens by canonical form."""
    if len(models) < 2:
        raise ValueError("compare at least two models (an adapted model and a helper or another adapted model)")
    forms_by_model = {}
    for name, (embeddings, tokenizer) in models.items():
        forms = canonical_tokens(tokenizer)
        # ids beyond the embedding rows (none in a checkpoint we write: the matrix is padded, not the vocabulary) and special tokens are out
        forms_by_model[name] = {form: i for i, form in enumerate(forms[: embeddings.shape[0]])
                                if form is not None and not form.special and form.data}
    shared = sorted(set.intersection(*(set(index) for index in forms_by_model.values())),
                    key=lambda form: (form.data, form.word_start))
    word_start = {position: form.word_start for position, form in enumerate(shared)}
    anchor_rows = choose_anchors(range(len(shared)), word_start, per_kind=anchors_per_kind, seed=seed)
    spaces = {
        name: embeddings[torch.as_tensor([forms_by_model[name][form] for form in shared])]
        for name, (embeddings, _) in models.items()
    }
    names, matrix = similarity_matrix(spaces, anchor_rows)
    return SimilarityTable(names, matrix, len(anchor_rows), len(shared))
