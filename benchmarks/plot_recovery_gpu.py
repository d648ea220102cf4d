"""The curves of a GPU recovery run (``benchmarks/recovery_gpu.py``): the LAPT loss (ALM distillation's where the
objective has it), bits per byte per step against the source's, and the generation scores; writes
``recovery-gpu.png`` beside ``recovery-gpu.json``. A curve point without a measure (LAPT's evaluations score
held-out text only; runs of the script before it ran ``vocadapt adapt`` scored out-of-domain text too) is left out.

    python benchmarks/plot_recovery_gpu.py [benchmarks/results/recovery-gpu]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

CURVES = (("bpb_held_out_it", "held-out Italian", "C0"), ("bpb_ood_it", "out-of-domain Italian", "C1"),
          ("bpb_held_out_en", "held-out English", "C2"), ("bpb_ood_en", "out-of-domain English", "C3"))
MODELS = (("source", "source"), ("adapted_step0", "Align, step 0"), ("adapted_lapt", "after LAPT"),
          ("adapted_final", "the final model"))
# (key, label, scale); only the measures some model has are drawn
BARS = (("chrf_en_it", "chrF en→it", 1), ("chrf_it_en", "chrF it→en", 1),
        ("cloze_it_acc_bytes", "cloze it (%)", 100), ("percent_generated_new_it", "%Gen", 1))


def plot(folder: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    results = json.loads((folder / "recovery-gpu.json").read_text(encoding="utf-8"))
    history = results["training"]["history"]
    figure, (loss, bpb, bars) = plt.subplots(1, 3, figsize=(16, 4.5))
    term = "distill_loss" if any("distill_loss" in row for row in history) else "loss"
    steps = [row for row in history if term in row and "head_fit_loss_after" not in row]
    loss.plot([row["tokens"] / 1e6 for row in steps], [row[term] for row in steps], lw=0.8, marker=".")
    loss.set_yscale("log")
    loss.set_title("ALM distillation loss" if term == "distill_loss" else "LAPT loss")
    loss.set_xlabel("training tokens (M)")
    final_tokens = results["training"]["tokens"] / 1e6
    for key, label, color in CURVES:
        points = [(0.0, results["adapted_step0"].get(key))] + [(point["tokens"] / 1e6, point.get(key))
                                                               for point in results["curve"]]
        points = [(x, y) for x, y in points if y is not None]
        if points:
            bpb.plot(*zip(*points), marker="o", color=color, label=label)
        if results["adapted_final"].get(key) is not None:
            bpb.plot([final_tokens], [results["adapted_final"][key]], marker="x", markersize=10, color=color)
        if results["source"].get(key) is not None:
            bpb.axhline(results["source"][key], color=color, ls="--", lw=0.8)
    bpb.set_title("bits per byte (dashed: source; x: after the head fit)")
    bpb.set_xlabel("training tokens (M)")
    bpb.legend(fontsize=7)
    models = [(name, label) for name, label in MODELS if results.get(name)]
    measures = [bar for bar in BARS if any(bar[0] in results[name] for name, _ in models)]
    positions, width = np.arange(len(measures)), 0.8 / len(models)
    for index, (name, label) in enumerate(models):
        bars.bar(positions + (index - (len(models) - 1) / 2) * width,
                 [results[name].get(key, 0.0) * scale for key, _, scale in measures], width, label=label)
    bars.set_xticks(positions)
    bars.set_xticklabels([title for _, title, _ in measures])
    bars.legend(fontsize=7)
    bars.set_title("generation")
    figure.suptitle(f"Recovery on one {results['device']}: {results.get('config', 'the GPU recipe')}, "
                    f"{final_tokens:.2f}M training tokens, then the head fit")
    figure.tight_layout()
    path = folder / "recovery-gpu.png"
    figure.savefig(path, dpi=90)
    return path


if __name__ == "__main__":
    print(plot(Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/recovery-gpu")))
