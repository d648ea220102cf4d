"""GGUF export measured by llama.cpp itself: export time, file size per quantisation, bits per byte per
quantisation, and llama.cpp's speed for the source and the adapted model on the same Italian text (the
equal-content speed-up): prefill (the text read as one prompt, batched) and decoding (the same text teacher-forced,
one token per step with the KV cache, as ``components/evaluation/decode_timing.py`` does for transformers and the
languages matrix reports). Each is given in tokens per second (each model's own tokens) and characters per second
(the same characters for both), and the speed-up is the source's time over the adapted model's.

    python benchmarks/gguf_export.py --adapted runs/italian-smollm2-expand/it/fvt/lapt/model \\
        --out-dir /tmp/gguf-bench [--source ~/.cache/vocadapt/models/smollm2-135m]

Without --source, the embedded default (SmolLM2-135M). Bits per byte are on the first --documents lines of the
embedded Italian test split (bytes of the text, BOS as context); decoding speed on the first --decode-chars
characters of the same lines, the models taking turns --repeats times (median counts), --threads threads.
--no-bits-per-byte skips the bits per byte (speed only); --reuse reads GGUFs an earlier run left in --out-dir.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def italian_lines(documents: int) -> list[str]:
    from vocadapt.platform.assets.embedded import load_assets

    lines = load_assets().corpus("it", "test").read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip()][:documents]


def export_all(model_dir: Path, out_dir: Path, label: str, converter: Path) -> dict[str, dict]:
    from vocadapt.components.export.gguf import export_gguf, quantize_gguf

    files = {}
    f16 = export_gguf(model_dir, out_dir / f"{label}-f16.gguf", "f16", converter)
    files["f16"] = {"path": f16.path, "seconds": f16.seconds, "bytes": f16.size_bytes,
                    "pre_tokenizer": f16.plan.pre_tokenizer}
    for quant in ("q8_0", "q4_k_m"):
        target = out_dir / f"{label}-{quant}.gguf"
        started = time.perf_counter()
        quantize_gguf(f16.path, target, quant)
        files[quant] = {"path": target, "seconds": time.perf_counter() - started, "bytes": target.stat().st_size}
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=None)
    parser.add_argument("--adapted", type=Path, default=None)
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--documents", type=int, default=40)
    parser.add_argument("--decode-chars", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-bits-per-byte", action="store_true")
    parser.add_argument("--reuse", action="store_true")
    args = parser.parse_args()

    from transformers import AutoTokenizer

    from vocadapt.components.export.llama_cpp_checks import (bits_per_byte, decode_seconds, load_gguf,
                                                             prefill_seconds, token_ids)
    from vocadapt.platform.assets.embedded import load_assets
    from vocadapt.platform.serving.gguf_export import converter_dir, require_llama_cpp

    require_llama_cpp()
    converter = converter_dir()
    models = {"source": args.source or load_assets().model_dir}
    if args.adapted:
        models["adapted"] = args.adapted
    lines = italian_lines(args.documents)
    decode_text = "\n".join(lines)[: args.decode_chars]
    args.out_dir.mkdir(parents=True, exist_ok=True)
    report = {"documents": len(lines), "bytes": sum(len(line.encode()) for line in lines),
              "decode_chars": len(decode_text), "threads": args.threads, "models": {}}
    for label, folder in models.items():
        if args.reuse and all((args.out_dir / f"{label}-{quant}.gguf").is_file() for quant in ("f16", "q4_k_m")):
            report["models"][label] = {"folder": str(folder), "f16": {}, "q4_k_m": {}}
            continue
        files = export_all(Path(folder), args.out_dir, label, converter)
        bos = AutoTokenizer.from_pretrained(str(folder)).bos_token_id
        entry = {"folder": str(folder)}
        for quant, info in files.items():
            entry[quant] = {"export_seconds": round(info["seconds"], 2), "megabytes": round(info["bytes"] / 1e6, 1)}
            if not args.no_bits_per_byte:
                llm = load_gguf(info["path"], n_ctx=2048, threads=args.threads)
                entry[quant]["bits_per_byte"] = round(bits_per_byte(llm, lines, bos), 4)
                del llm
            if "pre_tokenizer" in info:
                entry[quant]["pre_tokenizer"] = info["pre_tokenizer"]
            print(label, quant, entry[quant], flush=True)
        report["models"][label] = entry
    for quant in ("f16", "q4_k_m"):
        runners = {label: load_gguf(args.out_dir / f"{label}-{quant}.gguf", n_ctx=2048, threads=args.threads,
                                    logits_all=False) for label in models}
        ids = {label: token_ids(llm, decode_text) for label, llm in runners.items()}
        for measure, timer in (("prefill", prefill_seconds), ("decode", decode_seconds)):
            seconds = {label: [] for label in runners}
            for _ in range(args.repeats):
                for label, llm in runners.items():
                    seconds[label].append(timer(llm, ids[label]))
            for label in runners:
                median = statistics.median(seconds[label])
                report["models"][label][quant][measure] = {
                    "tokens": len(ids[label]), "seconds": round(median, 3),
                    "tokens_per_second": round(len(ids[label]) / median, 1),
                    "chars_per_second": round(len(decode_text) / median, 1)}
                print(label, quant, measure, report["models"][label][quant][measure], flush=True)
            if "adapted" in runners:
                report[f"speed_up_equal_content_{measure}_{quant}"] = round(
                    statistics.median(seconds["source"]) / statistics.median(seconds["adapted"]), 3)
        del runners
    print(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
