"""GGUF export measured by llama.cpp itself: export time, file size per quantisation, bits per byte per
quantisation, and llama.cpp's decoding speed for the source and the adapted model on the same Italian text (the
equal-content speed-up: both decode the same held-out text teacher-forced, one token per step with the KV cache,
as ``components/evaluation/decode_timing.py`` does for transformers and the languages matrix reports).

    python benchmarks/gguf_export.py --adapted runs/italian-smollm2-expand/it/fvt/lapt/model \\
        --out-dir /tmp/gguf-bench [--source ~/.cache/vocadapt/models/smollm2-135m]

Without --source, the embedded default (SmolLM2-135M). Bits per byte are on the first --documents lines of the
embedded Italian test split (bytes of the text, BOS as context); decoding speed on the first --decode-chars
characters of the same lines, the models taking turns --repeats times (median counts), --threads threads.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def italian_lines(documents: int) -> list[str]:
    from vocadapt.platform.assets import load_assets

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
    args = parser.parse_args()

    from transformers import AutoTokenizer

    from vocadapt.components.export.llama_cpp_checks import bits_per_byte, decode_seconds, load_gguf, token_ids
    from vocadapt.platform.assets import load_assets
    from vocadapt.platform.gguf_export import converter_dir, require_llama_cpp

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
        files = export_all(Path(folder), args.out_dir, label, converter)
        bos = AutoTokenizer.from_pretrained(str(folder)).bos_token_id
        entry = {"folder": str(folder)}
        for quant, info in files.items():
            llm = load_gguf(info["path"], n_ctx=2048, threads=args.threads)
            entry[quant] = {"export_seconds": round(info["seconds"], 2), "megabytes": round(info["bytes"] / 1e6, 1),
                            "bits_per_byte": round(bits_per_byte(llm, lines, bos), 4)}
            if "pre_tokenizer" in info:
                entry[quant]["pre_tokenizer"] = info["pre_tokenizer"]
            del llm
            print(label, quant, entry[quant], flush=True)
        report["models"][label] = entry
    for quant in ("f16", "q4_k_m"):
        runners = {label: load_gguf(args.out_dir / f"{label}-{quant}.gguf", n_ctx=2048, threads=args.threads,
                                    logits_all=False) for label in models}
        ids = {label: token_ids(llm, decode_text) for label, llm in runners.items()}
        seconds = {label: [] for label in runners}
        for _ in range(args.repeats):
            for label, llm in runners.items():
                seconds[label].append(decode_seconds(llm, ids[label]))
        for label in runners:
            median = statistics.median(seconds[label])
            report["models"][label][quant].update({"decode_tokens": len(ids[label]), "decode_seconds": round(median, 3),
                                                   "tokens_per_second": round(len(ids[label]) / median, 1),
                                                   "chars_per_second": round(len(decode_text) / median, 1)})
        if "adapted" in runners:
            report[f"speed_up_equal_content_{quant}"] = round(
                statistics.median(seconds["source"]) / statistics.median(seconds["adapted"]), 3)
        del runners
    print(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
