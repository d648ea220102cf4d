"""Throughput of the fertility suite: the batched report against a plain per-document loop, side by side.

The corpus is the embedded default's held-out text (``vocadapt assets`` first) or any files given. Both paths
count the same tokens (checked); MB/s is UTF-8 megabytes of text per second of wall time.

    python benchmarks/fertility.py [--tokenizer embedded] [--corpus FILE ...] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def per_document_loop(tokenizer, documents) -> dict:
    """What a notebook would do: one call per document, counting in Python."""
    tokens = words = n_bytes = 0
    for document in documents:
        tokens += len(tokenizer(document, add_special_tokens=False)["input_ids"])
        words += len(document.split())
        n_bytes += len(document.encode("utf-8"))
    return {"tokens": tokens, "tokens_per_word": tokens / words, "tokens_per_byte": tokens / n_bytes}


def best_of(repeat: int, function, *args) -> tuple[float, object]:
    timings, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = function(*args)
        timings.append(time.perf_counter() - started)
    return min(timings), result


def main() -> int:
    from vocadapt.components.tokenizers.fertility import fertility_report
    from vocadapt.platform.commands.tokenizer import load_tokenizer, read_lines

    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer", default="embedded")
    parser.add_argument("--corpus", nargs="*", default=None)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.corpus:
        files = args.corpus
    else:
        from vocadapt.platform.assets import load_assets

        assets = load_assets(languages=("it",))
        files = [assets.corpus("it", "validation"), assets.corpus("en", "validation")]
    documents = read_lines(files)
    tokenizer = load_tokenizer(args.tokenizer)
    megabytes = sum(len(document.encode("utf-8")) for document in documents) / 1e6
    fertility_report(tokenizer, documents[:10])  # warm the canonical-form cache once, as the pipeline would
    batched_seconds, report = best_of(args.repeat, fertility_report, tokenizer, documents)
    loop_seconds, loop = best_of(args.repeat, per_document_loop, tokenizer, documents)
    assert report.tokens == loop["tokens"], (report.tokens, loop["tokens"])
    print(f"corpus: {len(documents):,} documents, {megabytes:.2f} MB; tokenizer {args.tokenizer}; "
          f"best of {args.repeat}; {os.cpu_count()} CPUs")  # fmt: skip
    print(f"{'path':<28}{'seconds':>10}{'MB/s':>10}{'tokens':>12}")
    for name, seconds, tokens in (("batched fertility_report", batched_seconds, report.tokens),
                                  ("per-document loop", loop_seconds, loop["tokens"])):  # fmt: skip
        print(f"{name:<28}{seconds:>10.3f}{megabytes / seconds:>10.2f}{tokens:>12,}")
    print(f"speed-up: {loop_seconds / batched_seconds:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
