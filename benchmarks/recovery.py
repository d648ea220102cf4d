"""The recovery proof, side by side: which recipe gives an adapted model the source's quality with fewer tokens.

The arms are trials of a sweep the product runs (``configs/sweeps/recovery-cpu.yaml``: replace or expand x the
LAPT objective, Align rows, the same packed batches and token budget; each trial is ``vocadapt adapt`` on the GPU
recipe at CPU sizes). This script runs that sweep through ``pipelines/sweep.py::run_sweep`` (as ``vocadapt sweep
--config`` does), then reads what each trial's adapt run logged to MLflow and prints the arms' table:

- held-out bits per byte, Italian and English, of the source, of each arm's initialised rows (step 0) and after LAPT;
- the side-by-side benchmark each adapt run logs: out-of-domain bits per byte (Debian's fortunes, never trained
  on), Italian cloze ``acc_bytes``, chrF of one-shot en->it translations, %Gen, tokens per generated character and
  the tokens saved on the same text;

and the curves of held-out Italian bits per byte that LAPT evaluated every ``lapt.eval_every`` steps. Writes
``<out>/recovery.json`` and ``<out>/recovery.png``; the runs themselves are in the sweep's MLflow store.

    python benchmarks/recovery.py [--sweep configs/sweeps/recovery-cpu.yaml] [--set lapt.max_steps=10 ...]
        [--out benchmarks/results/recovery]
    python benchmarks/recovery.py --sweep-run RUN_ID     # the table of a sweep that already ran, from MLflow
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from recovery_gpu import SCORES  # noqa: E402  (the report's names of the product's metrics)

ROOT = Path(__file__).resolve().parent.parent
SWEEP = ROOT / "configs" / "sweeps" / "recovery-cpu.yaml"
ARM_FIELDS = ("init.mode", "lapt.objective", "lapt.strategy")  # what names an arm, in this order


def arm_name(params: dict) -> str:
    """``<mode>-<objective>[@<strategy>]`` from a trial's search-space values (the sweep's varied fields)."""
    mode, objective = params.get("init.mode", "expand"), params.get("lapt.objective", "clm")
    rest = {k: v for k, v in params.items() if k not in ARM_FIELDS}
    name = f"{mode}-{objective}" + (f"@{params['lapt.strategy']}" if "lapt.strategy" in params else "")
    return name + "".join(f" {key}={value}" for key, value in sorted(rest.items()))


def scores(metrics: dict[str, float], prefix: str, language: str = "it", english: str = "en") -> dict[str, float]:
    """The report's names of the product's side-by-side metrics (``prefix``: ``source_model.`` for the source)."""
    return {key: metrics[prefix + name.format(lang=language, english=english)] for key, name in SCORES.items()
            if prefix + name.format(lang=language, english=english) in metrics}


def collect(tracking_uri: str, sweep_run_id: str) -> dict:
    """The arms of a finished sweep, read from MLflow: under the sweep's run, each trial's run holds one adapt run
    (the source's scores) whose method run holds the arm's."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    experiment = client.get_run(sweep_run_id).info.experiment_id

    def children(run_id: str):
        return client.search_runs([experiment], f"tags.mlflow.parentRunId = '{run_id}'")

    results: dict = {"sweep_run_id": sweep_run_id, "tracking_uri": tracking_uri, "source": {}, "arms": {}}
    for trial in children(sweep_run_id):
        for adapt in children(trial.info.run_id):
            parent = adapt.data.metrics
            if not results["source"]:
                results["source"] = {"bpb_held_out_it": parent.get("source_model.bpb_target"),
                                     "bpb_held_out_en": parent.get("source_model.bpb_source")} | scores(
                    parent, "source_model.")
            for method in children(adapt.info.run_id):
                metrics = method.data.metrics
                fixed = {key: adapt.data.params[key] for key in ("init.mode", "lapt.objective")
                         if key in adapt.data.params}  # the run's own, where the sweep does not vary them
                params = fixed | json.loads(trial.data.tags.get("vocadapt.sweep.params", "{}"))
                curve = [(point.step, point.value) for point in sorted(
                    client.get_metric_history(method.info.run_id, "lapt_bits_per_byte_target"),
                    key=lambda point: point.step)]
                results["arms"][arm_name(params)] = {
                    "step0": {"bpb_held_out_it": metrics.get("bpb_target_zero_shot"),
                              "bpb_held_out_en": metrics.get("bpb_source_zero_shot")},
                    "final": {"bpb_held_out_it": metrics.get("bpb_target_after_lapt"),
                              "bpb_held_out_en": metrics.get("bpb_source_after_lapt")} | scores(metrics, ""),
                    "curve": curve, "adapt_run_id": adapt.info.run_id, "run_id": method.info.run_id}
    return results


def table(results: dict) -> str:
    columns = ["bpb_held_out_it", "bpb_held_out_en", "bpb_ood_it", "bpb_ood_en", "cloze_it_acc_bytes", "chrf_en_it",
               "percent_generated_new_it", "generated_tokens_per_character_it", "tokens_saved_same_text_it"]
    short = ["it bpb", "en bpb", "it OOD", "en OOD", "cloze", "chrF en-it", "%Gen", "tok/char", "saved"]
    lines = ["| arm | when | " + " | ".join(short) + " |", "| --- " * (len(short) + 2) + "|"]

    def row(name, when, metrics):
        cells = [f"{metrics[c]:.3f}" if metrics.get(c) is not None else "" for c in columns]
        return f"| {name} | {when} | " + " | ".join(cells) + " |"

    lines.append(row("source", "", results["source"]))
    for name, arm in sorted(results["arms"].items()):
        lines.append(row(name, "step 0", arm["step0"]))
        lines.append(row(name, "after LAPT", arm["final"]))
    return "\n".join(lines)


def plot(results: dict, path: Path) -> None:
    """Held-out Italian bits per byte along LAPT per arm, and each arm's final side-by-side scores."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("chrf_en_it", "chrF en->it"), ("bpb_ood_it", "out-of-domain Italian bpb"),
              ("percent_generated_new_it", "%Gen (Italian)")]
    figure, axes = plt.subplots(1, 1 + len(panels), figsize=(18, 4.5))
    names = sorted(results["arms"])
    for name in names:
        arm = results["arms"][name]
        points = [(0, arm["step0"]["bpb_held_out_it"])] + [tuple(point) for point in arm["curve"]]
        axes[0].plot(*zip(*[p for p in points if p[1] is not None]), marker="o", label=name)
    if results["source"].get("bpb_held_out_it") is not None:
        axes[0].axhline(results["source"]["bpb_held_out_it"], color="black", linestyle="--", label="source")
    axes[0].set_title("held-out Italian bpb along LAPT")
    axes[0].set_xlabel("step")
    axes[0].legend(fontsize=7)
    for axis, (key, title) in zip(axes[1:], panels):
        values = [results["arms"][name]["final"].get(key) or 0.0 for name in names]
        axis.bar(range(len(names)), values, color=[f"C{i}" for i in range(len(names))])
        axis.set_xticks(range(len(names)))
        axis.set_xticklabels(names, rotation=30, ha="right", fontsize=7)
        if results["source"].get(key) is not None:
            axis.axhline(results["source"][key], color="black", linestyle="--")
        axis.set_title(title)
    figure.tight_layout()
    figure.savefig(path, dpi=90)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweep", type=Path, default=SWEEP, help="the arms (a sweep config)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="one more override of every trial (appended to the sweep's overrides)")
    parser.add_argument("--sweep-run", default=None, help="read a finished sweep's MLflow run instead of running")
    parser.add_argument("--tracking-uri", default=None, help="with --sweep-run: its store (default: the config's)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/recovery"))
    args = parser.parse_args(argv)
    from vocadapt.platform.sweeps.tune import load_sweep_config

    sweep = load_sweep_config(args.sweep)
    sweep.overrides = [*sweep.overrides, *args.set]
    if args.sweep_run:
        from vocadapt.platform.config import ExperimentConfig
        from vocadapt.platform.tracking import resolve_tracking_uri

        base = ExperimentConfig.model_validate(sweep.base_tree())
        tracking_uri = resolve_tracking_uri(args.tracking_uri or base.tracking.tracking_uri)
        sweep_run_id = args.sweep_run
    else:
        from vocadapt.pipelines.sweep import run_sweep

        result = run_sweep(sweep)
        tracking_uri, sweep_run_id = result.tracking_uri, result.parent_run_id
    results = collect(tracking_uri, sweep_run_id)
    results["command"] = " ".join(["python", "benchmarks/recovery.py", *(argv if argv is not None else sys.argv[1:])])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "recovery.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    plot(results, args.out / "recovery.png")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
