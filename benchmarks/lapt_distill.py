"""What distillation costs: LAPT throughput and peak memory of clm, distill and clm+distill, side by side.

The teacher is the embedded SmolLM2-135M with its own tokenizer (49,152 tokens); the student has SmolLM2's body
with an Italian byte-level BPE trained here on the embedded corpus (``--student-vocabulary``, default 16,384) and
new rows drawn at random (throughput does not depend on them). Every arm trains on the same packed batches of the
embedded Italian and English text (75/25), in its own process, with the plain-torch engine (on a GPU: bf16 weights
for the teacher). Reported per arm: median student tokens per second after the first step, teacher tokens per
second, the teacher's share of the FLOPs, and the process's peak memory (max RSS on CPU, max allocated on a GPU).
The clm arm is the baseline.

    python benchmarks/lapt_distill.py [--steps 6] [--batch-size 2] [--sequence-length 128]
        [--student-vocabulary 16384] [--objectives clm distill clm+distill] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _student(assets, vocabulary: int, folder: Path):
    """SmolLM2's body under an Italian BPE of ``vocabulary`` tokens, rows resized (random new rows)."""
    import torch
    from transformers import AutoModelForCausalLM

    from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, train_tokenizer

    tokenizer = train_tokenizer([assets.corpus("it", "train")],
                                TokenizerTrainingSpec("bytelevel-bpe", vocabulary, max_lines=20000),
                                folder / "tokenizer", show_progress=False)
    model = AutoModelForCausalLM.from_pretrained(assets.model_dir, dtype=torch.float32)
    torch.manual_seed(0)
    model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    return model, tokenizer


def measure(objective: str, args) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vocadapt.components.metric_logging import InMemoryLogger
    from vocadapt.components.training import LaptData, LaptHooks, LaptRuntime, LaptSettings, train_lapt
    from vocadapt.components.training.data import read_documents
    from vocadapt.components.training.objectives import Distillation
    from vocadapt.platform.assets.embedded import load_assets

    assets = load_assets(languages=("it",))
    gpu = torch.cuda.is_available()
    with tempfile.TemporaryDirectory() as scratch:
        model, tokenizer = _student(assets, args.student_vocabulary, Path(scratch))
    device = "cuda" if gpu else "cpu"
    model.to(device)
    distillation = None
    if "distill" in objective:
        teacher = AutoModelForCausalLM.from_pretrained(assets.model_dir, dtype=torch.bfloat16 if gpu else torch.float32)
        distillation = Distillation(teacher, AutoTokenizer.from_pretrained(assets.model_dir), tokenizer)
    data = LaptData({"target": read_documents(assets.corpus("it", "train"))[:4000],
                     "source": read_documents(assets.corpus("en", "train"))[:4000]})
    settings = LaptSettings(max_steps=args.steps, batch_size=args.batch_size, sequence_length=args.sequence_length,
                            learning_rate=1e-4, warmup_steps=1, objective=objective, peak_flops=1e12)
    if gpu:
        torch.cuda.reset_peak_memory_stats()
    logger = InMemoryLogger()
    train_lapt(model, tokenizer, data, settings,
               hooks=LaptHooks(logger=logger),
               runtime=LaptRuntime(distillation=distillation))
    later = [metrics for step, metrics in logger.records if step and step > 1]
    peak = torch.cuda.max_memory_allocated() / 2**30 if gpu else \
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    teacher_share = None
    if "distill" in objective:
        teacher_share = statistics.median(m["mfu_teacher"] / m["mfu_with_teacher"] for m in later)
    return {"objective": objective, "device": torch.cuda.get_device_name(0) if gpu else "cpu",
            "tokens_per_second": statistics.median(m["tokens_per_second"] for m in later),
            "teacher_tokens_per_second": statistics.median(m.get("teacher_tokens_per_second", 0.0) for m in later),
            "teacher_flops_share": teacher_share, "peak_memory_gib": peak,
            "loss": later[-1]["loss"], "distill_loss": later[-1].get("distill_loss")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--student-vocabulary", type=int, default=16384)
    parser.add_argument("--objectives", nargs="+", default=["clm", "distill", "clm+distill"])
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one, args)), flush=True)
        return 0
    rows = []
    for objective in args.objectives:
        command = [sys.executable, __file__, *(sys.argv[1:] if argv is None else argv), "--one", objective]
        completed = subprocess.run(command, stdout=subprocess.PIPE, text=True)
        if completed.returncode != 0:
            raise SystemExit(f"lapt_distill: the {objective} arm failed")
        rows.append(json.loads(completed.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    baseline = next((row for row in rows if row["objective"] == "clm"), rows[0])
    print(f"LAPT, {args.steps} steps of {args.batch_size} x {args.sequence_length} student tokens, on "
          f"{rows[0]['device']} (median after the first step); baseline: {baseline['objective']}")
    print(f"{'objective':>12} {'tokens/s':>9} {'vs base':>8} {'teacher tok/s':>14} {'teacher FLOPs':>14} "
          f"{'peak GiB':>9}")
    for row in rows:
        share = f"{row['teacher_flops_share']:.0%}" if row["teacher_flops_share"] is not None else "-"
        print(f"{row['objective']:>12} {row['tokens_per_second']:>9.0f} "
              f"{row['tokens_per_second'] / baseline['tokens_per_second']:>8.2f} "
              f"{row['teacher_tokens_per_second']:>14.0f} {share:>14} {row['peak_memory_gib']:>9.2f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
