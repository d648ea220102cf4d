"""LAPT throughput on one GPU: the bare loop under DeepSpeed ZeRO-2 in bf16, tokens/s/device and MFU.

Two shapes: SmolLM2-135M (the embedded default's weights when built, else its shape with random weights) and a
Llama-3.2-1B-shaped model with random weights. Data are packed sequences of synthetic token ids (throughput does
not depend on the text). MFU = flops_per_token x tokens/s / peak, with 6N + 12 L d T FLOPs per token and the
device's dense bf16 peak (H100: 989 TFLOP/s, not the 1979 sparse figure). Goal: MFU >= 45% for the
1B shape on one H100. Side by side in one run: micro-batches per optimizer step (1, and 6 as in SAVA's run) and
``lapt.compile`` off and on, each configuration in its own process. Skipped (exit 0 with a message) without a GPU.
BENCHMARKS.md has the H100 figures (48.1% MFU for the 1B shape, compiled, 6 micro-batches).

    python benchmarks/lapt_throughput.py [--shapes smollm2-135m llama-3.2-1b] [--steps 20]
        [--batch-size 8] [--sequence-length 2048] [--grad-accumulation 1 6] [--compile off on] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
GOAL_MFU_1B = 0.45

SHAPES = {
    "smollm2-135m": dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                         num_attention_heads=9, num_key_value_heads=3, tie_word_embeddings=True,
                         rope_theta=100000.0),
    "llama-3.2-1b": dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                         num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=True,
                         rope_theta=500000.0),
}


class SyntheticTokenizer:
    """Turns each document into a fixed pseudo-random run of ids: enough for the loop's packing."""

    def __init__(self, vocab_size: int, tokens_per_document: int = 1000) -> None:
        self.vocab_size, self.length, self.eos_token_id = vocab_size, tokens_per_document, 0

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict:
        import numpy as np

        seed = int.from_bytes(text.encode()[:8].ljust(8, b"\0"), "little")
        return {"input_ids": np.random.default_rng(seed).integers(1, self.vocab_size, self.length).tolist()}


def build_model(shape: str):
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

    embedded = Path(os.environ.get("VOCADAPT_HOME", Path.home() / ".cache" / "vocadapt")) / "models" / shape
    if (embedded / "config.json").is_file():
        return AutoModelForCausalLM.from_pretrained(embedded, dtype=torch.float32), f"{embedded}"
    torch.manual_seed(0)
    config = LlamaConfig(**SHAPES[shape], max_position_embeddings=8192, bos_token_id=0, eos_token_id=0)
    config._attn_implementation = "sdpa"
    return LlamaForCausalLM(config), "random weights"


def measure(shape: str, args, accumulation: int, compiled: bool) -> dict:
    import torch

    from vocadapt.components.training import LaptData, LaptRuntime, LaptSettings, train_lapt
    from vocadapt.platform.lapt.deepspeed_config import deepspeed_engine_factory, init_single_process

    init_single_process("nccl")
    model, weights = build_model(shape)
    model.to("cuda")
    if args.activation_checkpointing:
        model.gradient_checkpointing_enable()
    settings = LaptSettings(max_steps=args.steps, batch_size=args.batch_size, sequence_length=args.sequence_length,
                            learning_rate=1e-4, warmup_steps=2, log_every=1, eval_every=0,
                            grad_accumulation_steps=accumulation, compile=compiled)
    data = LaptData({"target": [f"it-{i}" for i in range(4096)], "source": [f"en-{i}" for i in range(4096)]})
    factory = deepspeed_engine_factory({"enabled": True, "zero_stage": 2, "precision": "bf16"}, settings)
    result = train_lapt(model, SyntheticTokenizer(model.config.vocab_size), data, settings,
                        runtime=LaptRuntime(engine_factory=factory))
    after_warmup = [m for step, m in result.history if step > 3]
    figures = {
        "shape": shape + (" compiled" if compiled else ""), "weights": weights, "device": torch.cuda.get_device_name(0),
        "parameters": sum(p.numel() for p in model.parameters()),
        "batch": f"{accumulation} x {args.batch_size} x {args.sequence_length}",
        "tokens_per_second_per_device": statistics.median(m["tokens_per_second_per_device"] for m in after_warmup),
        "mfu": statistics.median(m["mfu"] for m in after_warmup) if "mfu" in after_warmup[0] else None,
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
    }
    del model, result
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--sequence-length", type=int, default=2048)
    parser.add_argument("--activation-checkpointing", action="store_true")
    parser.add_argument("--grad-accumulation", type=int, nargs="+", default=[1, 6],
                        help="micro-batches per optimizer step; 6 x 8 sequences is SAVA's Mistral-7B run per GPU "
                             "(global batch 3,072 on 64 GPUs)")
    parser.add_argument("--compile", nargs="+", type=lambda v: v == "on", default=[False, True],
                        metavar="{off,on}", help="torch.compile each decoder layer (fuses norms, rotary, SwiGLU)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("lapt_throughput: no CUDA device here; skipped (run it on a GPU machine)")
        return 0
    if args.one:  # a child process: one configuration, its figures as JSON on the last line
        shape, accumulation, compiled = json.loads(args.one)
        print(json.dumps(measure(shape, args, accumulation, compiled)), flush=True)
        return 0
    rows = []
    for shape in args.shapes:
        for accumulation in args.grad_accumulation:
            for compiled in args.compile:
                rows.append(_measure_in_child(argv, shape, accumulation, compiled))
                print(json.dumps(rows[-1]), flush=True)
    _print(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0


def _measure_in_child(argv: list[str] | None, shape: str, accumulation: int, compiled: bool) -> dict:
    """Each configuration in its own process: DeepSpeed keeps references to a finished engine's buffers, so a
    second 1B model in the same process ran out of memory."""
    import subprocess

    command = [sys.executable, __file__, *(sys.argv[1:] if argv is None else argv),
               "--one", json.dumps([shape, accumulation, compiled])]
    completed = subprocess.run(command, stdout=subprocess.PIPE, text=True)
    if completed.returncode != 0:
        raise SystemExit(f"lapt_throughput: {shape} (accumulation {accumulation}, compiled {compiled}) failed")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _print(rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="LAPT, DeepSpeed ZeRO-2 bf16, one GPU (median after warm-up)")
    for column in ("shape", "weights", "device", "batch", "tokens/s/device", "MFU", "peak GiB"):
        table.add_column(column)
    for row in rows:
        mfu = f"{row['mfu']:.1%}" if row["mfu"] is not None else "n/a"
        table.add_row(row["shape"], row["weights"], row["device"], row["batch"],
                      f"{row['tokens_per_second_per_device']:.0f}", mfu, f"{row['peak_memory_gib']:.1f}")
    Console().print(table)
    print(f"goal: MFU >= {GOAL_MFU_1B:.0%} for llama-3.2-1b on one H100")


if __name__ == "__main__":
    sys.exit(main())
