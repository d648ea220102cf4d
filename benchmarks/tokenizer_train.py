"""Seconds to train a 32,768-token tokenizer on 10 MB of text, for each kind.

The text is the embedded default's Italian and English training corpora (``vocadapt assets`` first), cut to
10 MB; or any files given.

    python benchmarks/tokenizer_train.py [--kind spm-bpe --kind bytelevel-bpe] [--megabytes 10] [--vocab-size 32768]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def cut_corpus(files: list[Path], megabytes: float, out: Path) -> float:
    """Write whole lines from the files, round-robin, until ``megabytes`` of UTF-8 text; return the size in MB."""
    budget, written = int(megabytes * 1e6), 0
    handles = [open(path, encoding="utf-8") for path in files]
    with open(out, "w", encoding="utf-8") as sink:
        while written < budget and handles:
            for handle in list(handles):
                line = handle.readline()
                if not line:
                    handles.remove(handle)
                    continue
                sink.write(line)
                written += len(line.encode("utf-8"))
    return written / 1e6


def main() -> int:
    from vocadapt.components.tokenizers.train import KINDS, TokenizerTrainingSpec, train_tokenizer

    parser = argparse.ArgumentParser()
    parser.add_argument("--kind", action="append", choices=KINDS)
    parser.add_argument("--corpus", nargs="*", default=None)
    parser.add_argument("--megabytes", type=float, default=10.0)
    parser.add_argument("--vocab-size", type=int, default=32768)
    args = parser.parse_args()
    if args.corpus:
        files = [Path(path) for path in args.corpus]
    else:
        from vocadapt.platform.assets.embedded import load_assets

        assets = load_assets(languages=("it",))
        files = [assets.corpus("it", "train"), assets.corpus("en", "train")]
    with tempfile.TemporaryDirectory() as folder:
        corpus = Path(folder) / "corpus.txt"
        size = cut_corpus(files, args.megabytes, corpus)
        print(f"corpus: {size:.2f} MB; vocabulary {args.vocab_size:,}; {os.cpu_count()} CPUs")
        print(f"{'kind':<16}{'seconds':>10}{'tokens':>10}")
        for kind in args.kind or ["bytelevel-bpe", "spm-bpe"]:
            started = time.perf_counter()
            tokenizer = train_tokenizer([corpus], TokenizerTrainingSpec(kind, args.vocab_size),
                                        Path(folder) / kind, show_progress=False)
            print(f"{kind:<16}{time.perf_counter() - started:>10.1f}{len(tokenizer):>10,}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
