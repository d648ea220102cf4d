"""Scoring a model's text in batches sorted by length against batches in document order, side by side.

What every adapted model and the source model are scored on in ``adapt`` (``pipelines/side_by_side.py``): bits per
byte on the out-of-domain text (Debian's fortunes by default, 200 paragraphs a language) and the Italian cloze items.
Fortunes run from one line to many, so in document order a short one shared a batch with a 128-token one and was
padded to it. Both orders run here on the same model and text, one after the other; the figures are positions
computed (padding included), seconds, and the scores, which must agree.

    python benchmarks/scoring_batches.py [--config configs/italian-smollm2-expand.yaml] [--repeat 2]
"""

from __future__ import annotations

import argparse
import math
import os
import time
from contextlib import contextmanager

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def in_document_order(lengths: list[int], batch_size: int) -> list[list[int]]:
    """The batching before: consecutive indices, in their order."""
    return [list(range(start, min(start + batch_size, len(lengths)))) for start in range(0, len(lengths), batch_size)]


@contextmanager
def batching(order):
    """``length_sorted_batches`` replaced by ``order`` where the scorers look it up, for the baseline."""
    import importlib

    from vocadapt.components.evaluation import cloze_scoring

    bits_per_byte = importlib.import_module("vocadapt.components.metrics.bits_per_byte")  # the package's function
    saved = bits_per_byte.length_sorted_batches
    bits_per_byte.length_sorted_batches = cloze_scoring.length_sorted_batches = order
    try:
        yield
    finally:
        bits_per_byte.length_sorted_batches = cloze_scoring.length_sorted_batches = saved


class PositionCounter:
    """Wraps a model's forward to count the positions it computes (batch x width, padding included)."""

    def __init__(self, model):
        self.positions = 0
        forward = model.forward

        def counted(*args, **kwargs):
            self.positions += int(kwargs["input_ids"].numel())
            return forward(*args, **kwargs)

        model.forward = counted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/italian-smollm2-expand.yaml")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each order; the best time is reported")
    arguments = parser.parse_args()

    import torch

    from vocadapt.components.evaluation.cloze_scoring import score_cloze_items
    from vocadapt.components.metrics.bits_per_byte import length_sorted_batches, score_documents
    from vocadapt.pipelines.side_by_side import items_for_config
    from vocadapt.platform.assets.sources import resolve_inputs
    from vocadapt.platform.config.loading import load_config
    from vocadapt.platform.model_loading import load_source_model, load_source_tokenizer

    config = load_config(arguments.config)
    inputs = resolve_inputs(config)
    items = items_for_config(config, inputs)
    tokenizer = load_source_tokenizer(config, inputs.source_model)
    model = load_source_model(config, inputs.source_model).eval()
    counter = PositionCounter(model)
    texts = ", ".join(f"{len(documents)} {stream} out-of-domain" for stream, documents in items.out_of_domain.items())
    print(f"{config.source.model} on {torch.get_num_threads()} threads; batch size {items.batch_size}, "
          f"max length {items.max_length}; {texts}, {len(items.cloze)} cloze items")

    def score() -> dict[str, float]:
        scores = {}
        for stream, documents in items.out_of_domain.items():
            parts = score_documents(model, tokenizer, documents, max_length=items.max_length,
                                    batch_size=items.batch_size)
            scores[f"bpb_ood_{stream}"] = sum(p.nats for p in parts) / math.log(2) / sum(p.bytes for p in parts)
        _, correct = score_cloze_items(model, tokenizer, items.cloze, batch_size=items.batch_size)
        scores["cloze acc_bytes"] = sum(correct) / len(correct)
        return scores

    results = {}
    for name, order in (("document order (before)", in_document_order), ("longest first (now)", length_sorted_batches)):
        timings = []
        with batching(order):
            for _ in range(arguments.repeat):
                counter.positions = 0
                started = time.perf_counter()
                scores = score()
                timings.append(time.perf_counter() - started)
        results[name] = (min(timings), counter.positions, scores)
        print(f"{name}: {min(timings):.1f} s (best of {arguments.repeat}), {counter.positions:,} positions computed; "
              + ", ".join(f"{key} {value:.6f}" for key, value in scores.items()))
    (before, before_positions, before_scores), (now, now_positions, now_scores) = results.values()
    print(f"speed-up {before / now:.2f}x, positions {before_positions / now_positions:.2f}x fewer; largest score "
          f"difference {max(abs(before_scores[k] - now_scores[k]) for k in before_scores):.2e}")


if __name__ == "__main__":
    main()
