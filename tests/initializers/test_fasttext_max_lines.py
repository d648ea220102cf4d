"""`init.helper: fasttext:max_lines=N` bounds the text the fastText helper trains on: the first N non-empty lines of
the corpus files, in order, and nothing after them (the helper's time grows with the corpus otherwise)."""

from __future__ import annotations

import torch

from vocadapt.components.helpers import resolve_helper


def test_max_lines_trains_on_the_first_lines_only(tmp_path, target_tokenizer, corpus_file):
    with open(corpus_file, encoding="utf-8") as handle:
        lines = [line.strip() for line in handle if line.strip()]
    kept = max(2, len(lines) // 4)
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"  # the bound runs across files, in order
    first.write_text("\n\n".join(lines[: kept // 2]) + "\n", encoding="utf-8")
    second.write_text("\n".join(lines[kept // 2 :]) + "\n", encoding="utf-8")
    only_kept = tmp_path / "kept.txt"
    only_kept.write_text("\n".join(lines[:kept]) + "\n", encoding="utf-8")

    bounded = resolve_helper(f"fasttext:dim=16,epoch=2,max_lines={kept}", target_tokenizer=target_tokenizer,
                             corpus_files=[str(first), str(second)])
    reference = resolve_helper("fasttext:dim=16,epoch=2", target_tokenizer=target_tokenizer,
                               corpus_files=[str(only_kept)])
    unbounded = resolve_helper("fasttext:dim=16,epoch=2", target_tokenizer=target_tokenizer,
                               corpus_files=[str(first), str(second)])

    assert torch.equal(bounded.vectors, reference.vectors)  # the same lines give the same vectors, byte for byte
    assert not torch.equal(bounded.vectors, unbounded.vectors)
    trained_on = {description.split(" on ")[1].split(" target tokens")[0]
                  for description in (bounded.description, unbounded.description)}
    assert len(trained_on) == 2, trained_on  # fewer target tokens than the whole corpus
