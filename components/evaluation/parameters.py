"""How many parameters a model has, and how many of them are vocabulary rows."""

from __future__ import annotations


def parameter_counts(model) -> dict[str, float]:
    """Total, embedding (input + untied head) and vocabulary rows, as SAVA Table 1 compares them."""
    total = sum(p.numel() for p in model.parameters())
    embeddings = model.get_input_embeddings().weight
    head = model.get_output_embeddings()
    embedding_parameters = embeddings.numel()
    if head is not None and head.weight.data_ptr() != embeddings.data_ptr():
        embedding_parameters += head.weight.numel()
    return {"parameters.total": float(total), "parameters.embeddings": float(embedding_parameters),
            "parameters.vocabulary_rows": float(embeddings.shape[0])}
