"""The recovery proof on one GPU, run by the product: ``vocadapt adapt configs/italian-smollm2-gpu.yaml`` (the same
``pipelines/adapt.py::run_adapt`` the command calls: preflight, tokenizer, Align rows, LAPT on Ray Train with
DeepSpeed in bf16, the head fit, the side-by-side scores, the promotion gates' items, MLflow, the registry), then
what only a GPU machine measures: the device, the run's wall time and training throughput, the device's peak memory,
and generation speed with a static KV cache and a compiled decoding step.

Every score in the report is one the product logged (``AdaptResult``: held-out bits per byte of the source and of
the adapted model at step 0 and after LAPT, LAPT's curve and head fit, the side-by-side benchmark with out-of-domain
bits per byte, the equal-content decode speed-up); nothing here trains or scores a model its own way. The recipe's
arms (another objective, the head fit off or tied, replace instead of expand) are ``--set`` overrides of the config
or entries of ``configs/sweeps/italian-smollm2-gpu-arms.yaml``, which ``vocadapt sweep`` runs. LAPT trains on the
GPU, and ``adapt`` scores every model on ``evaluation.device`` (default auto: the GPU here), in float32 (the sizes
are the config's ``evaluation`` section).

It reports, against the goals of the recovery proof (held-out Italian): bits per byte at or below the source's;
English within 5%; chrF en->it at least 90% of the source's; %Gen at least 30%; characters per second at least
0.9 x the fertility ratio. Results go to ``<out>/recovery-gpu.json`` (and the plot of
``benchmarks/plot_recovery_gpu.py`` beside it); the runs are in the MLflow store ``<out>/mlflow.db``.

    python benchmarks/recovery_gpu.py --out $OUT                      # on a machine with one CUDA GPU
    python benchmarks/recovery_gpu.py --out DIR --device cpu --tiny   # the same path on the CPU at toy size

``--device cpu`` turns the config's GPU switches off (``lapt.use_gpu``, ``lapt.deepspeed.enabled``,
``lapt.compile``; ``evaluation.device`` to cpu), as ``vocadapt adapt --set`` would; ``--device cuda`` on a machine
without CUDA, or without DeepSpeed when the config asks for it, is refused before anything runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "configs" / "italian-smollm2-gpu.yaml"
# what the config's GPU switches become on the CPU (the product has no other fallback: a run that asks for a GPU
# waits for one)
CPU_SWITCHES = {"lapt.use_gpu": "false", "lapt.deepspeed.enabled": "false", "lapt.compile": "false",
                "evaluation.device": "cpu"}
# toy sizes: the recipe's mode, method, objective, head fit and benchmark stay as shipped
TINY_SIZES = {"lapt.max_tokens": "null", "lapt.max_steps": "2", "lapt.batch_size": "2", "lapt.sequence_length": "32",
              "lapt.warmup_steps": "0", "lapt.eval_every": "1", "lapt.eval_max_length": "64",
              "lapt.checkpoint_every": "0", "lapt.cpus_per_worker": "1", "lapt.head_fit_tokens": "512",
              "tokenizer.vocab_size": "700", "tokenizer.expand_top_k": "40", "evaluation.max_documents": "16",
              "evaluation.max_length": "64", "evaluation.batch_size": "8", "evaluation.side_by_side_items": "6",
              "evaluation.max_new_tokens": "8", "evaluation.out_of_domain_documents": "16",
              "evaluation.equal_content_characters": "120", "evaluation.equal_content_repeats": "1"}
ITALIAN_PROMPTS = ["La capitale d'Italia è", "Per inserire una tabella nel documento,", "In principio Dio creò",
                   "Il comando Formato consente di"]
SCORES = {  # the report's names -> the product's metric names (side-by-side, without the source_model. prefix)
    "bpb_ood_it": "bpb_ood_target", "bpb_ood_en": "bpb_ood_source",
    "cloze_it_acc_bytes": "benchmark.side_by_side_cloze_{lang}.acc_bytes",
    "chrf_en_it": "benchmark.side_by_side_translation_{english}_{lang}.chrf",
    "percent_generated_new_it": "generation.percent_generated_new",
    "generated_tokens_per_character_it": "generation.tokens_per_character",
    "tokens_saved_same_text_it": "generation.same_text_token_saving",
    "equal_content_speed_up": "generation.equal_content_speed_up",
    "equal_content_token_ratio": "generation.equal_content_token_ratio",
}


def require_device(device: str, config) -> None:
    """Refuse, before any work, a CUDA run on a machine without CUDA, or one whose config asks for DeepSpeed where
    DeepSpeed is not installed."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"recovery_gpu.py --device cuda needs a CUDA device and torch {torch.__version__} sees "
                         "none; run it on a GPU machine, or add --device cpu (with --tiny for toy sizes): the same "
                         "pipeline with lapt.use_gpu, lapt.deepspeed.enabled and lapt.compile off")
    if device == "cuda" and config.lapt.deepspeed.enabled:
        import importlib.util

        if importlib.util.find_spec("deepspeed") is None:
            raise SystemExit("the config runs LAPT under DeepSpeed (lapt.deepspeed.enabled) and deepspeed is not "
                             "installed here; install the pinned wheel (DEVELOPERS.md, 'On a lent GPU machine') or "
                             "--set lapt.deepspeed.enabled=false")


def overrides(args) -> list[str]:
    """The config overrides of this run: the CPU's switches, the toy sizes, the steps the time allows, where it
    writes, then the user's ``--set`` (last, so they win)."""
    chosen: dict[str, str] = {}
    if args.device == "cpu":
        chosen |= CPU_SWITCHES | {"lapt.cpus_per_worker": str(min(os.cpu_count() or 1, 8))}
    if args.tiny:
        chosen |= TINY_SIZES
    if args.train_seconds and args.tokens_per_second:
        chosen |= {"lapt.max_tokens": "null", "lapt.max_steps": str(steps_for(
            args.train_seconds, args.tokens_per_second, args.tokens_per_step))}
    chosen |= {"output_dir": str(args.out / "runs"), "tracking.tracking_uri": f"sqlite:///{args.out / 'mlflow.db'}"}
    return [f"{key}={value}" for key, value in chosen.items()] + list(args.set)


def steps_for(train_seconds: float, tokens_per_second: float, tokens_per_step: int) -> int:
    """The LAPT steps a measured throughput fits in ``train_seconds`` (at least one)."""
    return max(1, int(train_seconds * tokens_per_second) // tokens_per_step)


class DeviceMemory:
    """The device's peak memory in use (every process: the Ray worker that trains included), sampled each second."""

    def __init__(self, device: str) -> None:
        self.device, self.peak, self._stop = device, 0, threading.Event()

    def __enter__(self) -> DeviceMemory:
        if self.device == "cuda":
            threading.Thread(target=self._sample, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()

    def _sample(self) -> None:
        import torch

        while not self._stop.is_set():
            free, total = torch.cuda.mem_get_info()
            self.peak = max(self.peak, total - free)
            self._stop.wait(1.0)


def device_facts(device: str) -> dict:
    import torch
    import transformers

    facts = {"device": device, "torch": torch.__version__, "transformers": transformers.__version__,
             "cpu_count": os.cpu_count()}
    if device == "cuda":
        properties = torch.cuda.get_device_properties(0)
        facts |= {"device": torch.cuda.get_device_name(), "device_memory_gib": properties.total_memory / 2**30,
                  "cuda": torch.version.cuda}
    return facts


def product_scores(result, config) -> dict:
    """The product's figures as the report's rows: ``source``, ``adapted_step0`` (held-out bits per byte of the
    initialised rows), ``adapted_final`` (after LAPT and the head fit, scored by the side-by-side benchmark)."""
    names = {key: name.format(lang=config.target.language, english=config.target.source_language)
             for key, name in SCORES.items()}
    best = result.best
    source = {"bpb_held_out_it": result.source_bits_per_byte["target"],
              "bpb_held_out_en": result.source_bits_per_byte["source"]}
    source |= {key: result.source_side_by_side[f"source_model.{name}"] for key, name in names.items()
               if f"source_model.{name}" in result.source_side_by_side}
    step0 = {"bpb_held_out_it": best.bits_per_byte["target_zero_shot"],
             "bpb_held_out_en": best.bits_per_byte["source_zero_shot"]}
    final = {"bpb_held_out_it": best.bits_per_byte.get("target_after_lapt", step0["bpb_held_out_it"]),
             "bpb_held_out_en": best.bits_per_byte.get("source_after_lapt", step0["bpb_held_out_en"])}
    final |= {key: best.side_by_side[name] for key, name in names.items() if name in best.side_by_side}
    return {"source": source, "adapted_step0": step0, "adapted_final": final}


def training_figures(lapt, tokens_per_step: int) -> tuple[dict, list, dict]:
    """LAPT's figures from the product's run: the totals, the curve (held-out bits per byte LAPT evaluated during
    the run) and the head fit's metrics (logged as one more step after the last)."""
    history = [{"step": step, **{k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}}
               for step, metrics in lapt.history]
    curve = [{"step": row["step"], "tokens": row.get("tokens", row["step"] * tokens_per_step),
              "bpb_held_out_it": row["bits_per_byte_target"], "bpb_held_out_en": row.get("bits_per_byte_source")}
             for row in history if "bits_per_byte_target" in row]
    head_fit = next(({k.removeprefix("head_fit_"): v for k, v in row.items() if k.startswith("head_fit_")}
                     for row in reversed(history) if any(k.startswith("head_fit_") for k in row)), {})
    steps = [row["tokens_per_second"] for row in history
             if "tokens_per_second" in row and "head_fit_loss_after" not in row]
    steady = sorted(steps[3:] or steps)  # the first steps compile and warm up
    training = {"steps": lapt.steps, "tokens": float(lapt.tokens),
                "median_tokens_per_second": steady[len(steady) // 2] if steady else None,
                "trainable_parameters": dict(lapt.trainable_parameters), "history": history}
    return training, curve, head_fit


def fertility_ratio(fertility: dict, language: str) -> float:
    """Source tokens over adapted tokens per character of held-out target text (the product's fertility table)."""
    source, target = fertility[f"source_tokenizer.{language}"], fertility[f"target_tokenizer.{language}"]
    return source["tokens_per_character"] / target["tokens_per_character"]


def speed(result, config, args) -> dict:
    """Generation speed, source against the adapted model the run kept, each generating exactly
    ``--generation-tokens`` tokens per row: on CUDA in bf16 with a static KV cache and a compiled decoding step
    (``benchmarks/generation_speed.py``), on the CPU eager in float32. (The equal-content decode is the product's
    own: ``generation.equal_content_speed_up``, in the adapted model's scores.)"""
    import torch

    import generation_speed
    from vocadapt.platform.model_loading import load_model
    from vocadapt.platform.assets.sources import resolve_inputs

    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    contenders = {}
    for name, folder in (("source", Path(resolve_inputs(config).source_model)), ("adapted", result.best.model_dir)):
        model, tokenizer = load_model(Path(folder), what=f"the {name} model")
        contenders[name] = (model.to(device=args.device, dtype=dtype), tokenizer)
    return {"generation_speed": generation_speed.side_by_side(
        contenders, ITALIAN_PROMPTS, batches=args.generation_batches, new_tokens=args.generation_tokens,
        repeats=args.generation_repeats, compiled=args.device == "cuda")}


def goals(results: dict) -> dict[str, dict]:
    """The recovery proof's goals on held-out Italian, each with the value reached and whether it is met."""
    source, adapted = results.get("source") or {}, results.get("adapted_final") or {}
    out: dict[str, dict] = {}
    if not adapted or not source:
        return out

    def goal(name, value, target, met):
        out[name] = {"value": value, "target": target, "met": bool(met)}

    goal("Italian bits per byte (held-out) <= source's", adapted["bpb_held_out_it"], source["bpb_held_out_it"],
         adapted["bpb_held_out_it"] <= source["bpb_held_out_it"])
    if "chrf_en_it" in adapted and "chrf_en_it" in source:
        goal("chrF en->it >= 90% of the source's", adapted["chrf_en_it"], 0.9 * source["chrf_en_it"],
             adapted["chrf_en_it"] >= 0.9 * source["chrf_en_it"])
    goal("%Gen >= 30", adapted.get("percent_generated_new_it", 0.0), 30.0,
         adapted.get("percent_generated_new_it", 0.0) >= 30.0)
    goal("English bits per byte (held-out) within 5% of the source's", adapted["bpb_held_out_en"],
         1.05 * source["bpb_held_out_en"], adapted["bpb_held_out_en"] <= 1.05 * source["bpb_held_out_en"])
    fertility = results.get("fertility_ratio")
    for batch, row in (results.get("generation_speed") or {}).items():
        figures = row.get("adapted")
        if figures and fertility:
            goal(f"characters/s speed-up at batch {batch} >= 0.9 x fertility ratio ({fertility:.3f})",
                 figures["characters_per_second_speed_up"], 0.9 * fertility,
                 figures["characters_per_second_speed_up"] >= 0.9 * fertility)
    return out


def run(args) -> dict:
    """``run_adapt`` on the config with this run's overrides, measured; writes ``recovery-gpu.json`` and returns it."""
    from rich.console import Console

    from vocadapt.pipelines.adapt import run_adapt
    from vocadapt.platform.config import load_config

    args.out.mkdir(parents=True, exist_ok=True)
    chosen = overrides(args)
    config = load_config(args.config, chosen)
    require_device(args.device, config)
    results: dict = {"command": " ".join(["python", "benchmarks/recovery_gpu.py", *args.argv]),
                     "config": str(args.config), "overrides": chosen, **device_facts(args.device)}
    path = args.out / "recovery-gpu.json"
    started = time.perf_counter()
    with DeviceMemory(args.device) as memory:
        result = run_adapt(config, Console(), overwrite=True)
    results["seconds"] = {"adapt": time.perf_counter() - started}
    if args.device == "cuda":
        results["peak_device_memory_gib"] = memory.peak / 2**30
    tokens_per_step = config.lapt.batch_size * config.lapt.sequence_length
    results |= product_scores(result, config)
    results["method"] = result.best.method
    results["fertility_ratio"] = fertility_ratio(result.fertility, config.target.language)
    if result.best.lapt:
        results["training"], results["curve"], results["head_fit"] = training_figures(result.best.lapt,
                                                                                      tokens_per_step)
    results["mlflow"] = {"tracking_uri": result.tracking_uri, "parent_run_id": result.parent_run_id,
                         "run_id": result.best.run_id}
    results["registered"] = list(result.registered) if result.registered else None
    path.write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")  # kept if the speed phase fails
    if args.generation_speed:
        began = time.perf_counter()
        results |= speed(result, config, args)
        results["seconds"]["generation_speed"] = time.perf_counter() - began
    results["goals"] = goals(results)
    path.write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="results folder: recovery-gpu.json, mlflow.db, runs/")
    parser.add_argument("--config", type=Path, default=RECIPE, help="the experiment (default: the GPU recipe)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a dotted config override, as `vocadapt adapt --set` (repeatable; wins over the rest)")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cpu: the config's GPU switches off (lapt.use_gpu, lapt.deepspeed.enabled, lapt.compile; "
                        "evaluation.device cpu)")
    parser.add_argument("--tiny", action="store_true", help="toy sizes: a few LAPT steps, a small vocabulary and "
                        "benchmark (the recipe's choices as shipped)")
    parser.add_argument("--train-seconds", type=float, default=None,
                        help="size lapt.max_steps to this many seconds of training at --tokens-per-second")
    parser.add_argument("--tokens-per-second", type=float, default=None,
                        help="LAPT's throughput an earlier run on this device measured (median_tokens_per_second)")
    parser.add_argument("--tokens-per-step", type=int, default=32 * 1024,
                        help="lapt.batch_size x lapt.sequence_length, for --train-seconds")
    parser.add_argument("--no-generation-speed", dest="generation_speed", action="store_false",
                        help="skip the generation speed phase")
    parser.add_argument("--generation-batches", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--generation-tokens", type=int, default=128)
    parser.add_argument("--generation-repeats", type=int, default=3)
    args = parser.parse_args(argv)
    args.argv = list(argv if argv is not None else sys.argv[1:])
    if bool(args.train_seconds) != bool(args.tokens_per_second):
        raise SystemExit("--train-seconds and --tokens-per-second go together (the steps are their product over "
                         "--tokens-per-step)")
    results = run(args)
    report(results)
    return 0


def report(results: dict) -> None:
    columns = ["bpb_held_out_it", "bpb_held_out_en", "bpb_ood_it", "bpb_ood_en", "cloze_it_acc_bytes", "chrf_en_it",
               "percent_generated_new_it", "generated_tokens_per_character_it", "tokens_saved_same_text_it",
               "equal_content_speed_up", "equal_content_token_ratio"]
    print("| model | " + " | ".join(columns) + " |")
    for name in ("source", "adapted_step0", "adapted_final"):
        row = results.get(name) or {}
        print(f"| {name} | " + " | ".join(f"{row[c]:.3f}" if row.get(c) is not None else "" for c in columns) + " |")
    for point in results.get("curve", []):
        print(json.dumps(point))
    print(json.dumps({k: v for k, v in results.get("training", {}).items() if k != "history"}))
    print(json.dumps(results.get("head_fit")))
    if "generation_speed" in results:
        print(json.dumps(results["generation_speed"]))
    for name, goal in results.get("goals", {}).items():
        print(f"{'MET ' if goal['met'] else 'MISS'} {name}: {goal['value']:.3f} (target {goal['target']:.3f})")
    print(f"{results['device']}: adapt {results['seconds']['adapt']:.0f} s; MLflow {results['mlflow']['tracking_uri']}")


if __name__ == "__main__":
    sys.exit(main())
