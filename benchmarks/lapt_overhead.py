"""Tokens per second of the LAPT loop bare (one process) and wrapped in Ray Train (one CPU worker), side by side.

Same model, same batch, same number of threads (the Ray worker reserves as many CPUs as the bare loop uses), the
same loop code: the difference is what Ray adds (worker process, process group, reporting). Throughput is the
median over steps after warm-up, in real tokens per second. Goal: Ray at least 0.9x the bare loop.

    python benchmarks/lapt_overhead.py [--model DIR] [--steps 12] [--batch-size 4] [--sequence-length 256]

Without --model a random Llama (hidden 256, 4 layers, vocabulary 8192) stands in, so a step takes ~0.1-0.5 s on
2 cores; the embedded SmolLM2-135M takes ~30 s per 4 x 256 step there.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
GOAL = 0.9
TEXT = ("Il gatto dorme sul divano mentre piove forte sulla città. The public library opens at nine. " * 40).strip()


def build_world(folder: Path, model_dir: str | None) -> Path:
    """A model folder with its tokenizer, and Italian / English text files, under ``folder``."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.training.lapt_tiny_world import ENGLISH, ITALIAN, make_tokenizer

    (folder / "it.txt").write_text("\n".join(ITALIAN * 50), encoding="utf-8")
    (folder / "en.txt").write_text("\n".join(ENGLISH * 50), encoding="utf-8")
    if model_dir:
        return Path(model_dir)
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = make_tokenizer(2000, texts=[TEXT])
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                         num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=1024,
                         tie_word_embeddings=True, bos_token_id=0, eos_token_id=0)
    LlamaForCausalLM(config).save_pretrained(folder / "model")
    tokenizer.save_pretrained(folder / "model")
    return folder / "model"


def bare(model_dir: Path, folder: Path, settings: dict) -> float:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vocadapt.components.training import LaptData, train_lapt
    from vocadapt.platform.config.lapt_sections import LaptSection

    torch.set_num_threads(settings["cpus_per_worker"])
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    data = LaptData.from_files(target=[folder / "it.txt"], source=[folder / "en.txt"])
    result = train_lapt(model, tokenizer, data, LaptSection.model_validate(settings))
    return _median_after_warmup(result.series("tokens_per_second"))


def on_ray(model_dir: Path, folder: Path, settings: dict) -> float:
    from vocadapt.platform.lapt.ray_train import LaptInputs, LaptPlacement, run_lapt_on_ray

    result = run_lapt_on_ray(model_dir, model_dir, settings, LaptInputs([folder / "it.txt"], [folder / "en.txt"]),
                             placement=LaptPlacement(folder / "ray-out", "overhead", storage_path=folder / "ray"))
    return _median_after_warmup(result.series("tokens_per_second"))


def _median_after_warmup(series: list[tuple[int, float]]) -> float:
    values = [value for step, value in series if step > 2]  # the first steps pay for allocation and caches
    return statistics.median(values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="model folder with its tokenizer (default: a random Llama)")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--sequence-length", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2, help="torch threads, and CPUs of the Ray worker")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    settings = {"max_steps": args.steps, "batch_size": args.batch_size, "sequence_length": args.sequence_length,
                "learning_rate": 1e-4, "warmup_steps": 1, "num_workers": 1, "cpus_per_worker": args.threads,
                "eval_every": 0, "checkpoint_every": 0}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        model_dir = build_world(folder, args.model)
        bare_tps = bare(model_dir, folder, settings)
        ray_tps = on_ray(model_dir, folder, settings)
    figures = {"bare_tokens_per_second": bare_tps, "ray_tokens_per_second": ray_tps, "ratio": ray_tps / bare_tps,
               "goal": GOAL, "settings": settings, "model": args.model or "random llama h256 l4 v2000"}
    _print(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2), encoding="utf-8")
    return 0


def _print(figures: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="LAPT loop: bare vs Ray Train (1 CPU worker), real tokens/s, median after warm-up")
    for column in ("bare", "Ray Train", "ratio", "goal"):
        table.add_column(column, justify="right")
    table.add_row(f"{figures['bare_tokens_per_second']:.0f}", f"{figures['ray_tokens_per_second']:.0f}",
                  f"{figures['ratio']:.2f}x", f">= {figures['goal']}x")
    Console().print(table)


if __name__ == "__main__":
    sys.exit(main())
