"""Quality of every initialiser, zero-shot: a thin caller of the leaderboard pipeline (``vocadapt leaderboard``).

The embedded default (SmolLM2-135M, English-first, byte-level BPE, tied head) gets its vocabulary replaced by the
demo's target tokenizer (configs/italian-smollm2.yaml: a 16,384-token byte-level BPE trained on the Italian training
corpus); each method initialises the new rows (the helper-based ones read the demo's fastText helper) and the
adapted model is scored on the same Italian and English held-out documents in bits per byte. The tokenizer, the
helper and the source model's scores are cached under ``--work``, so a second run only initialises and scores.
Everything is logged to MLflow (``<work>/mlflow.db``) as ``vocadapt leaderboard`` logs it.

    nice -n 5 python benchmarks/init_quality.py                         # every method, 16 documents per language
    python benchmarks/init_quality.py --methods fvt align --set evaluation.max_documents=32

The after-LAPT half of the table in BENCHMARKS.md came from this script's earlier version (git history, up to
commit c6e4865); a short LAPT of each method is ``vocadapt adapt configs/italian-smollm2.yaml --set
init.methods=[...]``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

DEMO_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "italian-smollm2.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/vocadapt-init-quality"))
    parser.add_argument("--methods", nargs="*", default=None, help="Default: every registered initialiser.")
    parser.add_argument("--documents", type=int, default=16, help="Held-out documents per language.")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="Dotted config override.")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--results", default="results.json", help="File name of the results under --work.")
    # accepted for scripts written against the earlier version, which also ran a LAPT phase (now `vocadapt adapt`)
    parser.add_argument("--phases", nargs="*", default=["zero-shot"], choices=["zero-shot"], help=argparse.SUPPRESS)
    parser.add_argument("--lapt-steps", type=int, default=0, choices=[0], help=argparse.SUPPRESS)
    arguments = parser.parse_args()

    import torch

    from vocadapt.pipelines.leaderboard import markdown_table, run_leaderboard
    from vocadapt.platform.config import load_config

    torch.set_num_threads(arguments.threads)
    arguments.work.mkdir(parents=True, exist_ok=True)
    config = load_config(DEMO_CONFIG, [
        f"evaluation.max_documents={arguments.documents}", f"output_dir={arguments.work / 'runs'}",
        f"tracking.tracking_uri=sqlite:///{arguments.work / 'mlflow.db'}", "tracking.experiment=init-quality",
        *arguments.overrides,
    ])
    result = run_leaderboard(config, arguments.methods, cache_dir=arguments.work / "cache")
    print(markdown_table(result))
    (arguments.work / arguments.results).write_text(json.dumps(result.record(), indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
