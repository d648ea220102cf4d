"""Zero-shot quality of every initialiser: SmolLM2-135M with an Italian tokenizer, held-out bits per byte.

The embedded default (SmolLM2-135M, English-first, byte-level BPE) gets its vocabulary replaced by a byte-level
BPE trained on the Italian training corpus (like the demo's: 16,384 tokens, ``like`` the source for its special
tokens). Each method initialises the new rows (fastText helper trained on the same corpus for the helper-based
methods); the adapted model is scored without any training on Italian and English held-out documents, in bits per
byte (comparable across tokenizers, PITFALLS 12). The unadapted source model is the reference row.

    python benchmarks/init_quality.py --documents 50 --max-length 128
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

HOME = Path(os.environ.get("VOCADAPT_HOME", Path.home() / ".cache" / "vocadapt"))
MODEL = HOME / "models" / "smollm2-135m"
CORPORA = HOME / "corpora"
METHODS = ["random", "multivariate", "random_token", "fvt", "merge", "align", "clp", "focus", "sava", "salt"]


def _documents(language: str, count: int) -> list[str]:
    with open(CORPORA / language / "validation.txt", encoding="utf-8") as handle:
        return [line.strip() for line in handle if line.strip()][:count]


def main() -> None:
    import torch
    from rich.console import Console
    from rich.table import Table
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vocadapt.components.helpers import resolve_helper
    from vocadapt.components.initializers import get_initializer
    from vocadapt.components.metrics.bits_per_byte import bits_per_byte
    from vocadapt.components.surgery import adapt_embeddings
    from vocadapt.components.tokenizers.train import train_tokenizer

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/vocadapt-init-quality"))
    parser.add_argument("--methods", nargs="*", default=METHODS)
    parser.add_argument("--vocab-size", type=int, default=16_384)
    parser.add_argument("--documents", type=int, default=50, help="Held-out documents per language.")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    arguments = parser.parse_args()
    torch.set_num_threads(arguments.threads)
    console = Console()
    source_tokenizer = AutoTokenizer.from_pretrained(str(MODEL))
    target_dir = arguments.work / f"target-{arguments.vocab_size}"
    corpus = [str(CORPORA / "it" / "train.txt")]
    if not target_dir.exists():
        train_tokenizer(corpus, "bytelevel-bpe", arguments.vocab_size, target_dir, like=source_tokenizer, show_progress=False)
    target_tokenizer = AutoTokenizer.from_pretrained(str(target_dir))
    documents = {language: _documents(language, arguments.documents) for language in ("it", "en")}
    helper = None
    if any(get_initializer(method).needs_helper for method in arguments.methods):
        with console.status("training the fastText helper"):
            helper = resolve_helper("fasttext:dim=100,epoch=3", target_tokenizer=target_tokenizer, corpus_files=corpus)

    def score(model, tokenizer) -> dict[str, float]:
        with torch.no_grad():
            return {
                language: round(bits_per_byte(model, tokenizer, texts, max_length=arguments.max_length, batch_size=8), 4)
                for language, texts in documents.items()
            }

    rows = [{"method": "source (no adaptation)", **score(AutoModelForCausalLM.from_pretrained(str(MODEL)).eval(), source_tokenizer)}]
    console.print(rows[-1])
    for method in arguments.methods:
        started = time.perf_counter()
        model = AutoModelForCausalLM.from_pretrained(str(MODEL)).eval()
        adapt_embeddings(
            model, source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer, method=method,
            helper=helper if get_initializer(method).needs_helper else None, corpus_files=corpus,
        )
        rows.append({"method": method, **score(model, target_tokenizer), "seconds": round(time.perf_counter() - started, 1)})
        console.print(rows[-1])
    table = Table("method", "Italian bits/byte", "English bits/byte")
    for row in rows:
        table.add_row(row["method"], str(row["it"]), str(row["en"]))
    console.print(table)
    arguments.work.mkdir(parents=True, exist_ok=True)
    (arguments.work / "results.json").write_text(json.dumps({"arguments": vars(arguments) | {"work": str(arguments.work)}, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
