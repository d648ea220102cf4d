"""The recovery proof on one GPU: SmolLM2-135M-Instruct expanded with 5,000 Italian tokens, Align rows, ALM
distillation from the source model at a real token budget (bf16, compiled layers), then the new LM-head rows fitted
on the hidden states of fresh tokens; source and adapted model scored side by side before and after.

The recipe is ``configs/italian-smollm2-gpu.yaml`` (expand 5K, Align, ``lapt.objective: distill``, 32 x 1,024 tokens
per step, learning rate 3e-4 with 32 warm-up steps and a cosine, 75% Italian / 25% English, ``head_fit_after`` on
1M tokens at 1e-2, 3 passes, the head untied first, no held-out check), run through the same components ``vocadapt
adapt`` runs (``train_lapt``, ``Distillation``, ``fit_new_output_rows``), without the Ray and MLflow edges, which do
not fit what travels to the lent GPU machine. Precision: fp32 weights with bf16 autocast (the teacher in bf16);
scoring in fp32.

It reports, against the goals of the recovery issue (held-out Italian):

- bits per byte at or below the source's (held-out and out-of-domain, Italian and English: English within 5%);
- chrF en->it at least 90% of the source's; %Gen at least 30%;
- generation speed: characters per second with a static KV cache and a compiled decoding step, batch 1 and 32,
  at least 0.9 x the fertility ratio (``benchmarks/generation_speed.py``), plus the equal-content decode speed-up.

Everything is deadline-driven (``--budget-seconds``): the token budget is cut to what the measured throughput of a
rehearsal allows (``--rehearse`` writes it: random weights of the same shapes, a few steps, which also warms the
compile caches), and every phase writes ``recovery-gpu.json`` as it ends, so a cut-off run still reports.

    python benchmarks/recovery_gpu.py --rehearse --out /tmp/rehearsal        # on the GPU machine, no weights needed
    python benchmarks/recovery_gpu.py --out $OUT --budget-seconds 480        # the real run
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import queue
import re
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import recovery  # noqa: E402  (the CPU benchmark: world, scores, chat turn)

STARTED = time.monotonic()
THROUGHPUT_FILE = Path("/tmp/vocadapt-recovery-gpu-rehearsal.json")
ITALIAN_PROMPTS = ["La capitale d'Italia è", "Per inserire una tabella nel documento,", "In principio Dio creò",
                   "Il comando Formato consente di"]


def elapsed() -> float:
    return time.monotonic() - STARTED


class OutOfTime(Exception):
    """Raised from the step hook when the training deadline has passed."""


def autocast_engine_factory(device_type: str):
    """The loop's plain-torch engine with every micro-batch's forward and backward under bf16 autocast."""
    import torch

    from vocadapt.components.training.engine import TorchEngine

    class AutocastEngine(TorchEngine):
        def micro_batch(self):
            return torch.autocast(device_type, dtype=torch.bfloat16)

    return AutocastEngine


def prefetching_mixture(view, depth: int = 4):
    """A PackedMixture that packs the next batches, and computes the teacher's view of them (ALM's re-tokenisation,
    pure Python), in a thread while the GPU trains on the current one. The loop itself prepares each batch when it
    needs it; this benchmark runs no checkpoints, so reading ahead cannot move a resume position."""
    from vocadapt.components.training.data import PackedMixture

    class PrefetchingMixture(PackedMixture):
        views: dict = {}

        def next_batch(self, batch_size):
            if not hasattr(self, "_queue"):
                self._queue = queue.Queue(maxsize=depth)
                threading.Thread(target=self._fill, args=(batch_size,), daemon=True).start()
            batch, teacher = self._queue.get()
            if isinstance(batch, BaseException):
                raise batch
            PrefetchingMixture.views[batch.input_ids.numpy().tobytes()] = teacher
            return batch

        def _fill(self, batch_size):
            try:
                while True:
                    batch = PackedMixture.next_batch(self, batch_size)
                    self._queue.put((batch, view(batch.input_ids)))
            except BaseException as error:  # noqa: BLE001 (handed to the training thread)
                self._queue.put((error, None))

    class PrefetchedView:
        def __call__(self, student_ids):
            found = PrefetchingMixture.views.pop(student_ids.numpy().tobytes(), None)
            return found if found is not None else view(student_ids)

    return PrefetchingMixture, PrefetchedView()


def uncompile(model) -> None:
    """Back to eager decoder layers (``nn.Module.compile`` undone) for scoring and generation at other shapes."""
    from vocadapt.components.training.strategies import transformer_layers

    for layer in transformer_layers(model):
        layer._compiled_call_impl = None


def quick_scores(model, tokenizer, world) -> dict[str, float]:
    """Held-out and out-of-domain bits per byte (the curve points during training)."""
    import torch

    with torch.compiler.set_stance("force_eager"):  # the compiled training layers would recompile per shape
        return recovery.bits_per_byte_scores(model, tokenizer, world)


def train(model, tokenizer, world, args, results, save) -> None:
    """LAPT (ALM distillation) until the token budget or the deadline, whichever comes first."""
    import torch

    from vocadapt.components.training import LaptData, LaptSettings, train_lapt
    from vocadapt.components.training import loop
    from vocadapt.components.training.objectives import Distillation

    source, source_tokenizer = world[0], world[1]
    teacher = copy.deepcopy(source).to(dtype=torch.bfloat16, device=args.device)
    distillation = Distillation(teacher, source_tokenizer, tokenizer)
    mixture_class, distillation.view = prefetching_mixture(distillation.view)
    loop_mixture, loop.PackedMixture = loop.PackedMixture, mixture_class  # the loop packs through the prefetcher
    tokens_per_step = args.batch_size * args.sequence_length
    train_seconds = args.budget_seconds - args.reserve_seconds - elapsed()
    max_tokens = args.max_tokens
    if THROUGHPUT_FILE.is_file() and not args.rehearse:
        measured = json.loads(THROUGHPUT_FILE.read_text())["tokens_per_second"]
        affordable = int(measured * 0.92 * max(0.0, train_seconds - 25))  # 25 s: compiling from warm caches
        max_tokens = min(max_tokens, max(tokens_per_step, affordable))
        results["training"]["rehearsal_tokens_per_second"] = measured
    steps = args.rehearse_steps if args.rehearse else max(1, max_tokens // tokens_per_step)
    settings = LaptSettings(
        objective=args.objective, max_steps=steps, batch_size=args.batch_size,
        sequence_length=args.sequence_length, learning_rate=args.learning_rate,
        warmup_steps=min(args.warmup_steps, max(1, steps // 10)), schedule="cosine",
        mixing={"target": 0.75, "source": 0.25}, seed=0, compile=args.compile, eval_every=0, log_every=1)
    results["training"].update({"planned_steps": steps, "planned_tokens": steps * tokens_per_step,
                                "budget_seconds_for_training": train_seconds})
    deadline = args.budget_seconds - args.reserve_seconds
    history = results["training"]["history"]
    curve = results["curve"]
    started = time.perf_counter()

    def every(step: int, metrics: dict) -> None:
        history.append({"step": step, "seconds": time.perf_counter() - started,
                        **{k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}})
        if step == 1 or step % 10 == 0:
            print(json.dumps({"step": step, "elapsed": round(elapsed()), **{
                k: round(float(metrics[k]), 4) for k in ("loss", "distill_loss", "tokens_per_second", "tokens")
                if k in metrics}}), flush=True)
        if args.eval_every and step % args.eval_every == 0 and not args.rehearse:
            curve.append({"step": step, "tokens": float(metrics.get("tokens", 0)), **quick_scores(
                model, tokenizer, world)})
            print(json.dumps({"curve": curve[-1]}), flush=True)
            save()
        if elapsed() > deadline:
            raise OutOfTime(f"training stopped at step {step} of {steps}: the deadline ({deadline:.0f} s) passed")

    try:
        result = train_lapt(model, tokenizer, LaptData(dict(world[8])), settings, step_hook=every,
                            distillation=distillation, engine_factory=autocast_engine_factory(args.device))
        results["training"]["completed"] = True
        results["training"]["final_step"] = result.steps
        results["training"]["trainable_parameters"] = {k: float(v) for k, v in result.trainable_parameters.items()}
    except OutOfTime as stop:
        results["training"]["completed"] = False
        results["training"]["stopped"] = str(stop)
        print(stop, flush=True)
    finally:
        loop.PackedMixture = loop_mixture
    seconds = time.perf_counter() - started
    steady = [row["tokens_per_second"] for row in history[3:] if "tokens_per_second" in row]
    steady.sort()
    results["training"].update({
        "steps": len(history), "tokens": history[-1]["tokens"] if history else 0.0, "seconds": seconds,
        "median_tokens_per_second": steady[len(steady) // 2] if steady else None,
        "epochs_of_italian_train": (history[-1]["tokens"] * 0.75 / args.italian_train_tokens) if history else 0.0})
    uncompile(model)
    del teacher, distillation
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def fit_head(model, tokenizer, world, args, results) -> None:
    """The new LM-head rows fitted on the hidden states of fresh tokens (``lapt.head_fit_after``)."""
    from vocadapt.components.training.data import LaptData, PackedMixture
    from vocadapt.components.training.head_fit import fit_new_output_rows

    started = time.perf_counter()
    mixture = PackedMixture(LaptData(dict(world[8])), tokenizer, mixing={"target": 0.75, "source": 0.25},
                            sequence_length=args.sequence_length, seed=1)
    count = max(1, -(-args.head_fit_tokens // (args.batch_size * args.sequence_length)))
    batches = [mixture.next_batch(args.batch_size) for _ in range(count)]
    new_ids = world[2]["expand"].new_token_ids
    fit = fit_new_output_rows(model, [(b.input_ids, b.attention_mask) for b in batches], new_ids,
                              passes=args.head_fit_passes, learning_rate=args.head_fit_learning_rate, seed=0,
                              untie=args.head_fit_untie, validation_fraction=args.head_fit_validation_fraction)
    results["head_fit"] = {**fit.metrics(), "tokens": float(sum(b.real_tokens for b in batches)),
                           "seconds": time.perf_counter() - started}


def random_source(world_args):
    """Rehearsal: a source model of the embedded default's shape with random weights (no weights needed)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from vocadapt.platform.assets import load_assets

    config = AutoConfig.from_pretrained(load_assets().model_dir)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32)


def speed(contenders, world, args, results) -> None:
    """Generation speed, static KV cache + compiled decoding, batch sizes ``args.generation_batches``; and the
    equal-content (teacher-forced) decode at batch 1."""
    import torch

    import generation_speed
    from vocadapt.components.evaluation.decode_timing import equal_content_speed_up, equal_content_timing

    bf16 = {name: (copy.deepcopy(model).to(torch.bfloat16), tokenizer) for name, (model, tokenizer) in contenders.items()}
    reference = world[7]
    timing = equal_content_timing(bf16, reference, repeats=3)
    names = list(bf16)
    results["equal_content"] = {name: timing[name] | equal_content_speed_up(timing[name], timing[names[0]])
                                for name in names}
    if elapsed() > args.budget_seconds - 40:
        results["generation_speed_skipped"] = f"no time left at {elapsed():.0f} s"
        return
    results["generation_speed"] = generation_speed.side_by_side(
        bf16, ITALIAN_PROMPTS, batches=args.generation_batches, new_tokens=args.generation_tokens,
        repeats=args.generation_repeats)
    del bf16
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def goals(results) -> dict[str, dict]:
    """The recovery issue's goals on held-out Italian, each with the value reached and whether it is met."""
    source, adapted = results.get("source") or {}, results.get("adapted_final") or {}
    out: dict[str, dict] = {}
    if not adapted or not source or results.get("rehearsal"):
        return out

    def goal(name, value, target, met):
        out[name] = {"value": value, "target": target, "met": bool(met)}

    goal("Italian bits per byte (held-out) <= source's", adapted["bpb_held_out_it"], source["bpb_held_out_it"],
         adapted["bpb_held_out_it"] <= source["bpb_held_out_it"])
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


def fertility_ratio(world, documents: int = 256) -> float:
    """Source tokens over adapted tokens on held-out Italian (the test split)."""
    from vocadapt.components.training.data import read_documents
    from vocadapt.platform.assets import load_assets

    texts = read_documents(load_assets().corpus("it", "test"))[:documents]
    source_tokenizer, adapted_tokenizer = world[1], world[2]["expand"].tokenizer
    count = lambda tokenizer: sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts)  # noqa: E731
    return count(source_tokenizer) / count(adapted_tokenizer)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="results folder (with --mlflow: the run's folder)")
    parser.add_argument("--mlflow", action="store_true",
                        help="log the finished run in --out (recovery-gpu.json, recovery-gpu.png) to MLflow and stop")
    parser.add_argument("--rehearse", action="store_true", help="random weights, a few steps; writes the throughput")
    parser.add_argument("--device", default="cuda", help="cpu: a smoke test of the same path (use --no-compile)")
    parser.add_argument("--rehearse-steps", type=int, default=12)
    parser.add_argument("--budget-seconds", type=float, default=480)
    parser.add_argument("--reserve-seconds", type=float, default=150, help="kept for what follows training")
    parser.add_argument("--trained-tokenizer", default=None, help="the 16K Italian BPE (default: trained here)")
    parser.add_argument("--objective", default="distill")
    parser.add_argument("--max-tokens", type=int, default=21_000_000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--sequence-length", type=int, default=1024)
    parser.add_argument("--learning-rate", type=float, default=3e-4)
    parser.add_argument("--warmup-steps", type=int, default=32)
    parser.add_argument("--no-compile", dest="compile", action="store_false")
    parser.add_argument("--eval-every", type=int, default=100, help="steps between curve points (bits per byte)")
    parser.add_argument("--head-fit-tokens", type=int, default=1_000_000)
    parser.add_argument("--head-fit-passes", type=int, default=3)
    parser.add_argument("--head-fit-learning-rate", type=float, default=1e-2)
    parser.add_argument("--head-fit-untie", action="store_true", default=True,
                        help="give the tied head its own rows before the fit (lapt.head_fit_untie; the default, "
                        "as in the config)")
    parser.add_argument("--head-fit-tied", dest="head_fit_untie", action="store_false",
                        help="fit the new rows of the tied head (they are also the new tokens' input rows)")
    parser.add_argument("--head-fit-validation-fraction", type=float, default=0.0,
                        help="sequences held out of the head fit; the rows with the lowest held-out loss are kept "
                        "(lapt.head_fit_validation_fraction, 0 in the config: the last rows)")
    parser.add_argument("--no-step0-scores", dest="step0_scores", action="store_false",
                        help="skip scoring the adapted model before training (the same on every run of a seed)")
    parser.add_argument("--no-generation-speed", dest="generation_speed", action="store_false",
                        help="skip the speed phase (CPU experiments)")
    parser.add_argument("--items", type=int, default=64, help="cloze items and translations per direction")
    parser.add_argument("--documents", type=int, default=64, help="bits-per-byte documents per set")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--generation-batches", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--generation-tokens", type=int, default=128)
    parser.add_argument("--generation-repeats", type=int, default=3)
    parser.add_argument("--italian-train-tokens", type=float, default=2.40e6 / 1.19,
                        help="the embedded Italian training text in expanded-tokenizer tokens (for epochs)")
    args = parser.parse_args(argv)
    if args.mlflow:  # here, after the GPU run: MLflow does not travel to the lent machine
        log_to_mlflow(args.out / "recovery-gpu.json")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("recovery_gpu.py needs a CUDA device (--device cpu: a smoke test of the same path at toy size)")
    world_args = argparse.Namespace(vocabulary=16384, out=args.out, tokenizer_lines=20000, expand_top_k=5000,
                                    documents=args.documents, items=args.items, max_new_tokens=args.max_new_tokens,
                                    reference_characters=1200, modes=("expand",),
                                    trained_tokenizer=args.trained_tokenizer,
                                    random_source=random_source if args.rehearse else None)
    results: dict = {"command": " ".join(["python", "benchmarks/recovery_gpu.py", *(argv or sys.argv[1:])]),
                     "device": torch.cuda.get_device_name() if args.device == "cuda" else args.device, "torch": torch.__version__,
                     "rehearsal": args.rehearse, "training": {"history": []}, "curve": [], "phases": {}}
    import transformers

    results["transformers"] = transformers.__version__
    path = args.out / ("rehearsal.json" if args.rehearse else "recovery-gpu.json")

    def save():
        path.write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")

    def phase(name, function, *call_args):
        began = time.perf_counter()
        try:
            function(*call_args)
        except OutOfTime:
            raise
        except Exception as error:  # noqa: BLE001 (a failed phase is reported; the others still run)
            import traceback

            traceback.print_exc()
            results["phases"][name] = {"error": f"{type(error).__name__}: {error}"}
        else:
            results["phases"][name] = {"seconds": time.perf_counter() - began}
        print(f"[{elapsed():.0f} s] {name}: {results['phases'][name]}", flush=True)
        save()

    torch.manual_seed(0)
    state: dict = {}

    def build():
        state["world"] = world = recovery.build_world(world_args)
        source, change = world[0].to(args.device), world[2]["expand"]
        state["model"] = world[3]["expand"].to(args.device)
        state["tokenizer"], state["new_ids"] = change.tokenizer, change.new_token_ids
        results["new_tokens"] = len(change.new_token_ids)
        results["fertility_ratio"] = fertility_ratio(world)

    phase("setup", build)
    world, model, tokenizer = state["world"], state["model"], state["tokenizer"]
    source, source_tokenizer = world[0], world[1]
    if args.rehearse:  # scores of random weights mean nothing: one curve point proves the path
        phase("step 0 scores", lambda: results.update(adapted_step0=quick_scores(model, tokenizer, world)))
    else:
        phase("source scores", lambda: results.update(source=recovery.score(source, source_tokenizer, world, None),
                                                      source_chat=recovery.chat_reply(source, source_tokenizer)))
        if args.step0_scores:
            phase("step 0 scores", lambda: results.update(
                adapted_step0=recovery.score(model, tokenizer, world, state["new_ids"])))
    phase("training", train, model, tokenizer, world, args, results, save)
    if args.rehearse and args.device == "cuda" and results["training"].get("median_tokens_per_second"):
        THROUGHPUT_FILE.write_text(json.dumps({"tokens_per_second": results["training"]["median_tokens_per_second"]}))
    if not args.rehearse:  # what LAPT alone reached, before the head fit changes the new rows
        phase("scores before the head fit", lambda: results.update(
            adapted_lapt=recovery.score(model, tokenizer, world, state["new_ids"])))
    phase("head fit", fit_head, model, tokenizer, world, args, results)
    if args.rehearse:
        phase("final scores", lambda: results.update(adapted_final=quick_scores(model, tokenizer, world)))
    else:
        phase("final scores", lambda: results.update(
            adapted_final=recovery.score(model, tokenizer, world, state["new_ids"]),
            adapted_chat=recovery.chat_reply(model, tokenizer)))
    if args.generation_speed:
        phase("generation speed", speed, {"source": (source, source_tokenizer), "adapted": (model, tokenizer)},
              world, args, results)
    results["goals"] = goals(results)
    results["seconds"] = elapsed()
    if torch.cuda.is_available():
        results["peak_gpu_gib"] = torch.cuda.max_memory_allocated() / 2**30
    save()
    report(results)
    return 0


def log_to_mlflow(path: Path) -> None:
    """One MLflow run (experiment ``recovery``) for a finished GPU run: its settings, the scores of every model,
    the curve per step, the goals, and the JSON and the plot beside it (``recovery-gpu.png``) as artifacts."""
    import mlflow

    results = json.loads(path.read_text(encoding="utf-8"))
    mlflow.set_experiment("recovery")
    with mlflow.start_run(run_name=f"recovery-gpu ({results['device']})"):
        mlflow.log_params({"command": results["command"][:500], "device": results["device"],
                           "torch": results["torch"], "transformers": results["transformers"]})
        for name in ("source", "adapted_step0", "adapted_lapt", "adapted_final"):
            if results.get(name):
                mlflow.log_metrics({f"{name}.{key}": value for key, value in results[name].items()})
        for point in results["curve"]:
            mlflow.log_metrics({k: v for k, v in point.items() if k not in ("step", "tokens")}, step=point["step"])
        for row in results["training"]["history"]:
            mlflow.log_metrics({k: row[k] for k in ("distill_loss", "loss", "tokens_per_second") if k in row},
                               step=int(row["step"]))
        for name, goal in results.get("goals", {}).items():
            mlflow.set_tag("goal: " + re.sub(r"[^\w\-. :/]", "", name.replace("<=", "at most").replace(">=", "at least").replace("%", " percent")),
                           f"{goal['value']:.3f} vs {goal['target']:.3f}: "
                           f"{'met' if goal['met'] else 'missed'}")
        mlflow.log_artifact(str(path))
        if (path.parent / "recovery-gpu.png").is_file():
            mlflow.log_artifact(str(path.parent / "recovery-gpu.png"))


def report(results: dict) -> None:
    columns = ["bpb_held_out_it", "bpb_held_out_en", "bpb_ood_it", "bpb_ood_en", "cloze_it_acc_bytes", "chrf_en_it",
               "chrf_it_en", "percent_generated_new_it", "generated_tokens_per_character_it",
               "tokens_saved_same_text_it"]
    print("| model | " + " | ".join(columns) + " |")
    for name in ("source", "adapted_step0", "adapted_lapt", "adapted_final"):
        row = results.get(name) or {}
        print(f"| {name} | " + " | ".join(f"{row[c]:.3f}" if c in row else "" for c in columns) + " |")
    for point in results["curve"]:
        print(json.dumps(point))
    print(json.dumps({k: v for k, v in results["training"].items() if k != "history"}))
    print(json.dumps(results.get("head_fit")))
    print(json.dumps(results.get("generation_speed")))
    print(json.dumps(results.get("equal_content")))
    for name, goal in results.get("goals", {}).items():
        print(f"{'MET ' if goal['met'] else 'MISS'} {name}: {goal['value']:.3f} (target {goal['target']:.3f})")
    for key in ("source_chat", "adapted_chat"):
        if key in results:
            print(f"{key}: {results[key]!r}")
    print(f"total {results['seconds']:.0f} s; phases: {json.dumps(results['phases'])}")


if __name__ == "__main__":
    sys.exit(main())
