"""Generation throughput of a model and its source model, side by side on the same prompts ("Design choices"
Table 3, "0.01GB" Table 3): tokens/s, characters/s, examples/s, %Gen, chrF, and the speed-up.

Prompts are the offline suite's translation prompts (SAVA Table 8, embedded corpora's test split). Each model is
warmed up on one prompt before it is timed; with ``--backend vllm`` each model gets its own server from the
serving environment, started and stopped in turn.

    python benchmarks/generation_throughput.py --model DIR --source DIR [--backend transformers|vllm]
        [--examples 32] [--max-new-tokens 64] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="adapted model folder")
    parser.add_argument("--source", required=True, help="source model folder")
    parser.add_argument("--backend", choices=["transformers", "vllm"], default="transformers")
    parser.add_argument("--examples", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    from rich.console import Console
    from rich.table import Table

    from vocadapt.platform.evaluation.harness import offline_environment
    from vocadapt.platform.evaluation.offline_tasks import HeldOutData, build_offline_tasks
    from vocadapt.pipelines.evaluate_steps import Contender, generation_step, load_model
    from vocadapt.platform.evaluation.suites import load_suite

    offline_environment()
    console = Console()
    suite = load_suite("offline", {"generation.backend": args.backend, "generation.examples": args.examples,
                                   "generation.max_new_tokens": args.max_new_tokens,
                                   "translation.items": args.examples})
    with tempfile.TemporaryDirectory(prefix="vocadapt-throughput-") as scratch:
        work = Path(scratch)
        tasks = build_offline_tasks(suite, HeldOutData.from_embedded(["it", "en"]), work / "tasks")
        contenders = {"": Contender(Path(args.model), *load_model(Path(args.model))),
                      "source_model.": Contender(Path(args.source), *load_model(Path(args.source)))}
        metrics = generation_step(suite, tasks, contenders, work, console)
    table = Table(title=f"Generation side by side ({args.backend}, {args.examples} prompts per direction)")
    for column in ("task", "model", "tokens/s", "chars/s", "examples/s", "%Gen", "chrF", "speed-up (chars/s)"):
        table.add_column(column, justify="right" if column not in ("task", "model") else "left")
    for task in tasks.translation_tasks:
        for prefix, label in (("", "adapted"), ("source_model.", "source")):
            head = f"{prefix}generation.{task}."
            speed = metrics.get(f"speed_up.{task}.characters_per_second") if not prefix else 1.0
            table.add_row(task, label, *(f"{metrics.get(head + k, float('nan')):.2f}" for k in
                                         ("tokens_per_second", "characters_per_second", "examples_per_second",
                                          "percent_generated_new", "chrf")), f"{speed:.2f}x")
    console.print(table)
    console.print(f"overall speed-up: {metrics['speed_up.characters_per_second']:.2f}x characters/s, "
                  f"{metrics['speed_up.examples_per_second']:.2f}x examples/s")
    if args.json:
        args.json.write_text(json.dumps(metrics, indent=2, sort_keys=True), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
