"""The curves of a GPU recovery run (``benchmarks/recovery_gpu.py``): the distillation loss, bits per byte per step
against the source's, and the generation scores; writes ``recovery-gpu.png`` beside ``recovery-gpu.json``.

    python benchmarks/plot_recovery_gpu.py [benchmarks/results/recovery-gpu]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

CURVES = (("bpb_held_out_it", "held-out Italian", "C0"), ("bpb_ood_it", "out-of-domain Italian", "C1"),
          ("bpb_held_out_en", "held-out English", "C2"), ("bpb_ood_en", "out-of-domain English", "C3"))
MODELS = (("source", "source"), ("adapted_step0", "Align, step 0"), ("adapted_lapt", "after LAPT"),
          ("adapted_final", "LAPT + head fit"))
BARS = (("chrf_en_it", "chrF en→it"), ("chrf_it_en", "chrF it→en"), ("percent_generated_new_it", "%Gen"))


def plot(folder: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    results = json.loads((folder / "recovery-gpu.json").read_text(encoding="utf-8"))
    history = results["training"]["history"]
    figure, (loss, bpb, bars) = plt.subplots(1, 3, figsize=(16, 4.5))
    loss.plot([row["tokens"] / 1e6 for row in history], [row["distill_loss"] for row in history], lw=0.8)
    loss.set_yscale("log")
    loss.set_title("ALM distillation loss")
    loss.set_xlabel("training tokens (M)")
    final_tokens = results["training"]["tokens"] / 1e6
    for key, label, color in CURVES:
        xs = [0] + [point["tokens"] / 1e6 for point in results["curve"]]
        ys = [results["adapted_step0"][key]] + [point[key] for point in results["curve"]]
        bpb.plot(xs, ys, marker="o", color=color, label=label)
        bpb.plot([final_tokens], [results["adapted_final"][key]], marker="x", markersize=10, color=color)
        bpb.axhline(results["source"][key], color=color, ls="--", lw=0.8)
    bpb.set_title("bits per byte (dashed: source; x: after the head fit)")
    bpb.set_xlabel("training tokens (M)")
    bpb.legend(fontsize=7)
    models = [(name, label) for name, label in MODELS if results.get(name)]
    positions, width = np.arange(len(BARS)), 0.8 / len(models)
    for index, (name, label) in enumerate(models):
        bars.bar(positions + (index - (len(models) - 1) / 2) * width,
                 [results[name].get(key, 0.0) for key, _ in BARS], width, label=label)
    bars.set_xticks(positions)
    bars.set_xticklabels([title for _, title in BARS])
    bars.legend(fontsize=7)
    bars.set_title("generation")
    figure.suptitle(f"Recovery on one {results['device']}: expand 5K + Align, ALM distillation, "
                    f"{final_tokens:.1f}M tokens, then the head fit")
    figure.tight_layout()
    path = folder / "recovery-gpu.png"
    figure.savefig(path, dpi=90)
    return path


if __name__ == "__main__":
    print(plot(Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/recovery-gpu")))
