"""Embedding-structure comparison between models (SAVA §6): align rows by token, draw anchors, compute the
pairwise similarity matrix, and write it as a table (JSON) and a heat map (PNG).

Models may have different tokenizers: rows are matched on the tokens' canonical forms (bytes plus word-start flag,
PITFALLS 1), so only tokens every model has are compared, and anchors are drawn from them, half word-initial.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from vocadapt.components.evaluation.embedding_similarity import choose_anchors, similarity_matrix
from vocadapt.components.tokenizers.canonical import canonical_tokens


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
        # ids beyond the embedding rows (never: checkpoints pad the matrix, PITFALLS 7) and special tokens are out
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


def write_similarity_artifacts(table: SimilarityTable, folder: Path) -> tuple[Path, Path]:
    """``similarity.json`` and ``similarity.png`` (annotated heat map) in ``folder``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    json_path = folder / "similarity.json"
    json_path.write_text(json.dumps(table.as_dict(), indent=2), encoding="utf-8")
    size = 1.2 + 0.9 * len(table.names)
    figure, axes = plt.subplots(figsize=(size + 1.5, size))
    image = axes.imshow(table.matrix, cmap="viridis", vmin=min(min(row) for row in table.matrix), vmax=100)
    axes.set_xticks(range(len(table.names)), table.names, rotation=45, ha="right")
    axes.set_yticks(range(len(table.names)), table.names)
    for i, row in enumerate(table.matrix):
        for j, value in enumerate(row):
            axes.text(j, i, f"{value:.1f}", ha="center", va="center", color="white" if value < 90 else "black")
    axes.set_title(f"Embedding similarity\n({table.anchors} anchors, {table.tokens} tokens)")
    figure.colorbar(image, ax=axes)
    figure.tight_layout()
    png_path = folder / "similarity.png"
    figure.savefig(png_path, dpi=100, bbox_inches="tight", metadata={"Software": None})
    plt.close(figure)
    return json_path, png_path
