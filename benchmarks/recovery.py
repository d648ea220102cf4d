"""The recovery proof, side by side: which recipe gives an adapted model the source's quality with fewer tokens.

SmolLM2-135M-Instruct (the embedded default) adapted to Italian, every arm on the same packed batches of the embedded
Italian and English training text (75/25) and the same token budget (steps x batch x length), Align initialisation:

- ``replace-<objective>``: the source vocabulary replaced by a 16,384-token Italian byte-level BPE;
- ``expand-<objective>``: the source vocabulary expanded with the 5,000 most frequent new tokens of that BPE on the
  corpus, the English word list protected (English tokenizes as before);
- objectives ``clm``, ``distill`` (ALM from the source model, cross-tokenizer) and ``clm+distill``;
- ``0.01gb``: the "0.01GB" paper's recipe as a baseline (expand + Align + 2x2 layer selection + MTP);
- ``<arm>@<strategy>``: that arm under another ``lapt.strategy`` (``expand-clm@embeddings``, ``expand-clm@new-head``:
  only the new LM-head rows, fitted on the frozen model's hidden states of the same token budget).

Every ``--eval-every`` steps, for every arm (step 0 once per vocabulary: the arms of one vocabulary start from the
same model), and once for the source model:

- bits per byte on held-out Italian and English (validation split of the training corpora) and on out-of-domain
  Italian and English (Debian fortunes, never trained on);
- Italian cloze ``acc_bytes``; chrF of greedy one-shot en->it and it->en translations;
- %Gen and tokens per character of the Italian it generates (the promotion gate's measure).

At the end, the equal-content speed-up per vocabulary: the time to decode the same Italian reference text with a KV
cache, teacher-forced, batch 1, source and adapted taking turns, median of ``--repeats``; printed beside the token
ratio (:mod:`components.evaluation.decode_timing`).

Writes ``<out>/recovery.json``, ``<out>/recovery.png`` (the curves) and, with ``--mlflow``, one MLflow run per arm
(metrics per step) with the plot and table as artifacts.

    python benchmarks/recovery.py [--steps 30] [--eval-every 15] [--batch-size 4] [--sequence-length 128]
        [--arms replace-clm ... 0.01gb] [--items 16] [--out benchmarks/results/recovery] [--mlflow]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

OBJECTIVES = ("clm", "distill", "clm+distill")
ARMS = (*(f"replace-{o}" for o in OBJECTIVES), *(f"expand-{o}" for o in OBJECTIVES), "0.01gb")


@dataclass(frozen=True)
class Arm:
    name: str
    mode: str  # replace | expand
    objective: str
    strategy: str = "full"


def arm(name: str) -> Arm:
    if name == "0.01gb":
        return Arm(name, "expand", "mtp", "2x2-ls")
    recipe, _, strategy = name.partition("@")  # e.g. expand-clm@two-stage: another LAPT strategy for that arm
    mode, objective = recipe.split("-", 1)
    if mode not in ("replace", "expand") or objective not in OBJECTIVES:
        raise SystemExit(f"unknown arm {name!r}: choose from {', '.join(ARMS)} (optionally @<lapt strategy>)")
    return Arm(name, mode, objective, strategy or "full")


def build_world(args):
    """Source model and tokenizer, the two adapted tokenizers and their Align-initialised models, the items."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vocadapt.components.initializers import configure_initializer
    from vocadapt.components.surgery import adapt_embeddings
    from vocadapt.components.tokenizers.expand import expand_with_top_k
    from vocadapt.components.tokenizers.replace import replace_vocabulary
    from vocadapt.components.training.data import read_documents
    from vocadapt.pipelines.side_by_side import build_items
    from vocadapt.platform.assets import load_assets
    from vocadapt.platform.out_of_domain import out_of_domain_documents

    assets = load_assets(languages=("it",))
    source_tokenizer = AutoTokenizer.from_pretrained(assets.model_dir)
    if getattr(args, "random_source", None):  # a rehearsal of the GPU run: the shapes without the weights
        source = args.random_source(args)
    else:
        source = AutoModelForCausalLM.from_pretrained(assets.model_dir, dtype=torch.float32)
    italian_train = assets.corpus("it", "train")
    trained = target_tokenizer(args, italian_train, source_tokenizer)
    lexicon = assets.lexicon("en")
    modes = getattr(args, "modes", None) or ("replace", "expand")
    changes = {}
    if "replace" in modes:
        changes["replace"] = replace_vocabulary(source_tokenizer, trained)
    if "expand" in modes:
        changes["expand"] = expand_with_top_k(
            source_tokenizer, trained, read_documents(italian_train)[: args.tokenizer_lines], args.expand_top_k,
            protect=read_documents(assets.corpus("en", "train"))[:20000],
            protect_words=lexicon.read_text(encoding="utf-8").split() if lexicon else None)
    align = configure_initializer("align")
    models = {}
    for mode, change in changes.items():
        models[mode] = adapt_embeddings(
            copy.deepcopy(source), source_tokenizer=source_tokenizer, target_tokenizer=change.tokenizer,
            target_to_source=change.target_to_source, new_target_ids=change.new_token_ids, method=align,
            mode=mode, seed=0, corpus_files=[str(italian_train)])
    held_out = {"target": read_documents(assets.corpus("it", "validation"))[: args.documents],
                "source": read_documents(assets.corpus("en", "validation"))[: args.documents]}
    out_of_domain = {"target": out_of_domain_documents("it", limit=args.documents),
                     "source": out_of_domain_documents("en", limit=args.documents)}
    items = {
        direction: build_items(
            language=direction[1], source_language=direction[0],
            documents=read_documents(assets.corpus("it", "test")), parallel_test=assets.parallel("it", "test"),
            parallel_shots=assets.parallel("it", "validation"), items=args.items, seed=0,
            max_new_tokens=args.max_new_tokens)
        for direction in (("en", "it"), ("it", "en"))
    }
    items[("it", "en")].cloze = []  # the Italian cloze is scored once, with the en->it items
    reference = " ".join(read_documents(assets.corpus("it", "test"))[:40])[: args.reference_characters]
    data = {"target": read_documents(italian_train), "source": read_documents(assets.corpus("en", "train"))}
    return source, source_tokenizer, changes, models, held_out, out_of_domain, items, reference, data


def target_tokenizer(args, italian_train, source_tokenizer):
    """The 16K Italian BPE: trained here, or loaded from ``args.trained_tokenizer`` (a folder an earlier run
    trained: the GPU run takes the tokenizer trained on the CPU, so both measure the same vocabulary)."""
    from transformers import AutoTokenizer

    from vocadapt.components.tokenizers.train import train_tokenizer

    if getattr(args, "trained_tokenizer", None):
        return AutoTokenizer.from_pretrained(args.trained_tokenizer)
    return train_tokenizer([italian_train], "bytelevel-bpe", args.vocabulary, args.out / "tokenizer-trained",
                           max_lines=args.tokenizer_lines, seed=0, like=source_tokenizer, show_progress=False,
                           overwrite=True)


def bits_per_byte_scores(model, tokenizer, world) -> dict[str, float]:
    """Held-out and out-of-domain bits per byte, Italian and English (``bpb_{held_out,ood}_{it,en}``)."""
    from vocadapt.components.metrics.bits_per_byte import bits_per_byte

    held_out, out_of_domain = world[4], world[5]
    metrics = {}
    for name, streams in (("held_out", held_out), ("ood", out_of_domain)):
        for stream, documents in streams.items():
            language = "it" if stream == "target" else "en"
            metrics[f"bpb_{name}_{language}"] = bits_per_byte(model, tokenizer, documents, max_length=128,
                                                              batch_size=8)
    return metrics


def score(model, tokenizer, world, new_ids) -> dict[str, float]:
    from vocadapt.pipelines.side_by_side import score_model

    source_tokenizer, items = world[1], world[6]
    metrics = bits_per_byte_scores(model, tokenizer, world)
    en_it = score_model(model, tokenizer, items[("en", "it")], new_token_ids=new_ids, source_tokenizer=source_tokenizer)
    it_en = score_model(model, tokenizer, items[("it", "en")], new_token_ids=new_ids)
    metrics["cloze_it_acc_bytes"] = en_it["benchmark.side_by_side_cloze_it.acc_bytes"]
    metrics["chrf_en_it"] = en_it["benchmark.side_by_side_translation_en_it.chrf"]
    metrics["chrf_it_en"] = it_en["benchmark.side_by_side_translation_it_en.chrf"]
    metrics["generated_tokens_per_character_it"] = en_it["generation.tokens_per_character"]
    metrics["tokens_saved_same_text_it"] = en_it["generation.same_text_token_saving"]
    if "generation.percent_generated_new" in en_it:
        metrics["percent_generated_new_it"] = en_it["generation.percent_generated_new"]
    return metrics


def train_arm(spec: Arm, world, args, log) -> list[tuple[int, dict[str, float]]]:
    """Train one arm for ``args.steps`` steps, scoring every ``args.eval_every``; the (step, metrics) curve."""
    import torch
    from transformers import AutoModelForCausalLM

    from vocadapt.components.training import LaptData, LaptSettings, train_lapt
    from vocadapt.components.training.objectives import Distillation
    from vocadapt.platform.assets import load_assets

    source, source_tokenizer, changes, models, *_ = world
    tokenizer, new_ids = changes[spec.mode].tokenizer, changes[spec.mode].new_token_ids
    model = copy.deepcopy(models[spec.mode])
    distillation = None
    if "distill" in spec.objective:
        teacher = AutoModelForCausalLM.from_pretrained(load_assets(languages=("it",)).model_dir, dtype=torch.float32)
        distillation = Distillation(teacher, source_tokenizer, tokenizer)
    settings = LaptSettings(max_steps=args.steps, batch_size=args.batch_size, sequence_length=args.sequence_length,
                            learning_rate=args.learning_rate, warmup_steps=max(1, args.steps // 10),
                            objective=spec.objective, strategy=spec.strategy, seed=0, peak_flops=1e12,
                            mixing={"target": 0.75, "source": 0.25}, head_fit_passes=args.head_fit_passes)
    curve: list[tuple[int, dict[str, float]]] = []

    def every(step: int, metrics: dict) -> None:
        if step % args.eval_every == 0 or step == args.steps:
            scored = score(model, tokenizer, world, new_ids) | {"loss": metrics.get("loss", float("nan"))}
            curve.append((step, scored))
            log(spec.name, step, scored)

    train_lapt(model, tokenizer, LaptData(dict(world[8])), settings, step_hook=every, distillation=distillation)
    curve[-1][1]["chat"] = chat_reply(model, tokenizer)
    return curve


CHAT = [{"role": "user", "content": "Ciao! Qual è la capitale d'Italia?"}]


def chat_reply(model, tokenizer, max_new_tokens: int = 40) -> str:
    """One greedy chat turn in Italian through the model's own chat template (SmolLM2-Instruct's, kept by adapt)."""
    import torch

    prompt = tokenizer.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"].to(model.device)
    model.eval()
    with torch.no_grad():
        output = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False,
                                eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.eos_token_id)
    return tokenizer.decode(output[0, ids.shape[1]:], skip_special_tokens=True).strip()


def speed_ups(world, args) -> dict[str, dict[str, float]]:
    from vocadapt.components.evaluation.decode_timing import equal_content_speed_up, equal_content_timing

    source, source_tokenizer, changes, models, *_ , reference, _ = world
    contenders = {"source": (source, source_tokenizer)} | {mode: (models[mode], changes[mode].tokenizer)
                                                           for mode in changes}
    timing = equal_content_timing(contenders, reference, repeats=args.repeats)
    return {mode: timing[mode] | equal_content_speed_up(timing[mode], timing["source"]) for mode in changes} | {
        "source": timing["source"]}


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("bpb_held_out_it", "held-out Italian bpb"), ("bpb_ood_it", "out-of-domain Italian bpb"),
              ("bpb_held_out_en", "held-out English bpb"), ("chrf_en_it", "chrF en->it"),
              ("cloze_it_acc_bytes", "Italian cloze acc_bytes"), ("percent_generated_new_it", "%Gen (Italian)")]
    figure, axes = plt.subplots(2, 3, figsize=(15, 8))
    for axis, (key, title) in zip(axes.flat, panels):
        for name, curve in results["arms"].items():
            points = [(step, m[key]) for step, m in curve if key in m]
            if points:
                axis.plot(*zip(*points), marker="o", label=name)
        if key in results["source"]:
            axis.axhline(results["source"][key], color="black", linestyle="--", label="source")
        axis.set_title(title)
        axis.set_xlabel("step")
    axes.flat[0].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=90)


def table(results: dict) -> str:
    columns = ["bpb_held_out_it", "bpb_held_out_en", "bpb_ood_it", "bpb_ood_en", "cloze_it_acc_bytes", "chrf_en_it",
               "chrf_it_en", "percent_generated_new_it", "generated_tokens_per_character_it", "tokens_saved_same_text_it"]
    short = ["it bpb", "en bpb", "it OOD", "en OOD", "cloze", "chrF en-it", "chrF it-en", "%Gen", "tok/char", "saved"]
    lines = ["| arm | step | " + " | ".join(short) + " |", "| --- " * (len(short) + 2) + "|"]

    def row(name, step, metrics):
        cells = [f"{metrics[c]:.3f}" if c in metrics else "" for c in columns]
        return f"| {name} | {step} | " + " | ".join(cells) + " |"

    lines.append(row("source", "", results["source"]))
    for name, curve in results["arms"].items():
        for step, metrics in curve:
            lines.append(row(name, step, metrics))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--eval-every", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--learning-rate", type=float, default=3e-4)
    parser.add_argument("--arms", nargs="+", default=list(ARMS))
    parser.add_argument("--head-fit-passes", type=int, default=12,
                        help="passes over the hidden states for arms @new-head (lapt.head_fit_passes)")
    parser.add_argument("--vocabulary", type=int, default=16384)
    parser.add_argument("--expand-top-k", type=int, default=5000)
    parser.add_argument("--tokenizer-lines", type=int, default=20000)
    parser.add_argument("--documents", type=int, default=24, help="held-out and out-of-domain documents per language")
    parser.add_argument("--items", type=int, default=16, help="cloze items and translations per direction")
    parser.add_argument("--max-new-tokens", type=int, default=40)
    parser.add_argument("--reference-characters", type=int, default=1200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/recovery"))
    parser.add_argument("--mlflow", action="store_true", help="log each arm as an MLflow run (experiment recovery)")
    args = parser.parse_args(argv)
    specs = [arm(name) for name in args.arms]
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    torch.manual_seed(0)
    started = time.perf_counter()
    world = build_world(args)
    print(f"setup: {time.perf_counter() - started:.0f} s", flush=True)

    def log(name, step, metrics):
        print(json.dumps({"arm": name, "step": step, **{k: round(v, 4) for k, v in metrics.items()
                                                        if isinstance(v, float)}}), flush=True)

    results: dict = {"command": " ".join(["python", "benchmarks/recovery.py", *(argv or sys.argv[1:])]),
                     "tokens_per_arm": args.steps * args.batch_size * args.sequence_length, "arms": {}}
    source, source_tokenizer, changes, models = world[:4]
    results["source"] = score(source, source_tokenizer, world, None)
    results["source_chat"] = chat_reply(source, source_tokenizer)
    log("source", 0, results["source"])
    step_zero = {}
    for mode in sorted({spec.mode for spec in specs}):
        step_zero[mode] = score(models[mode], changes[mode].tokenizer, world, changes[mode].new_token_ids)
        log(f"{mode} (Align, step 0)", 0, step_zero[mode])
    for spec in specs:
        arm_started = time.perf_counter()
        curve = [(0, step_zero[spec.mode])] + train_arm(spec, world, args, log)
        results["arms"][spec.name] = curve
        print(f"{spec.name}: {time.perf_counter() - arm_started:.0f} s", flush=True)
        (args.out / "recovery.json").write_text(json.dumps(results, indent=2), encoding="utf-8")  # partial
    results["speed_up"] = speed_ups(world, args)
    results["seconds"] = time.perf_counter() - started
    (args.out / "recovery.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    plot(results, args.out / "recovery.png")
    print(table(results))
    print(f"chat, source: {results['source_chat']!r}")
    for name, curve in results["arms"].items():
        print(f"chat, {name} (step {curve[-1][0]}): {curve[-1][1].get('chat', '')!r}")
    for mode, row in results["speed_up"].items():
        if mode != "source":
            print(f"equal-content decode, {mode}: {row['tokens']:.0f} tokens vs {results['speed_up']['source']['tokens']:.0f}"
                  f" (token ratio {row['token_ratio']:.2f}), {row['seconds']:.2f} s vs "
                  f"{results['speed_up']['source']['seconds']:.2f} s: speed-up {row['speed_up']:.2f}x")
    print(f"total: {results['seconds'] / 60:.1f} min; {results['tokens_per_arm']:,} training tokens per arm")
    if args.mlflow:
        log_to_mlflow(results, args.out)
    return 0


def log_to_mlflow(results: dict, out: Path) -> None:
    import mlflow

    mlflow.set_experiment("recovery")
    with mlflow.start_run(run_name="recovery") as parent:
        mlflow.log_param("command", results["command"])
        mlflow.log_metrics({f"source_model.{k}": v for k, v in results["source"].items()})
        for mode, row in results["speed_up"].items():
            if mode != "source":
                mlflow.log_metrics({f"{mode}.speed_up": row["speed_up"], f"{mode}.token_ratio": row["token_ratio"]})
        mlflow.log_artifact(str(out / "recovery.png"))
        mlflow.log_artifact(str(out / "recovery.json"))
        for name, curve in results["arms"].items():
            with mlflow.start_run(run_name=name, nested=True, parent_run_id=parent.info.run_id):
                for step, metrics in curve:
                    mlflow.log_metrics({k: v for k, v in metrics.items() if isinstance(v, float)}, step=step)
                if "chat" in curve[-1][1]:
                    mlflow.log_text(curve[-1][1]["chat"], "chat_reply.txt")


if __name__ == "__main__":
    sys.exit(main())
