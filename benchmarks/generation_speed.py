"""Generation speed on a GPU: characters per second of greedy generation with a static KV cache and a compiled
forward (transformers' ``generate`` with ``cache_implementation="static"``, which compiles the decoding step with
CUDA graphs), source and adapted model side by side on the same prompts, at batch 1 and batch 32.

vLLM cannot be installed on the lent GPU machine (no package index there, and its wheels exceed what travels), so
this is the GPU generation measure of the recovery proof (``benchmarks/recovery_gpu.py``). Every row generates
exactly ``new_tokens`` tokens (end-of-sequence suppressed), so the work per step is fixed and the figure that differs
between the models is how many characters those tokens spell: characters per second = tokens per second x
characters per token. A model's decoding step time depends on its shapes, not on its weights; ``--random-shapes``
times models of the embedded default's shapes (source vocabulary and source + 5,000) with random weights, which is
what a rehearsal on the GPU can do before the real weights are there.

    python benchmarks/generation_speed.py --random-shapes --batches 1 32 --new-tokens 128   # CUDA only
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class DecodeRun:
    """One timed generation: ``batch_size`` prompts, exactly ``new_tokens`` new tokens each, the median of
    ``repeats`` timed calls, the decoding step compiled with a static KV cache (``compiled``) or eager."""

    batch_size: int
    new_tokens: int
    repeats: int = 3
    compiled: bool = True


def static_cache_generation(model, tokenizer, prompts: list[str], run: DecodeRun) -> dict[str, float]:
    """Greedy generation of exactly ``run.new_tokens`` tokens for the first ``run.batch_size`` prompts (cycled when
    there are fewer), static KV cache, the decoding step compiled (``run.compiled``; else the default dynamic cache,
    eager). Two warm-up calls (compilation and CUDA graph capture), then the median of ``run.repeats`` timed
    calls."""
    import torch

    batch_size, new_tokens, repeats, compiled = run.batch_size, run.new_tokens, run.repeats, run.compiled

    from vocadapt.platform.evaluation.generation import left_padded

    batch = [prompts[index % len(prompts)] for index in range(batch_size)]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    encoded = left_padded(tokenizer, batch, pad_id)
    input_ids, attention = encoded["input_ids"].to(model.device), encoded["attention_mask"].to(model.device)
    options = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, pad_token_id=pad_id)
    if compiled:
        options["cache_implementation"] = "static"  # transformers then compiles the decoding step (CUDA graphs)
    model.eval()
    seconds, output = [], None
    compile_started = time.perf_counter()
    synchronize = torch.cuda.synchronize if model.device.type == "cuda" else (lambda: None)
    with torch.inference_mode():
        for attempt in range(2 + repeats):
            synchronize()
            started = time.perf_counter()
            output = model.generate(input_ids=input_ids, attention_mask=attention, **options)
            synchronize()
            if attempt == 1:
                warm_up = time.perf_counter() - compile_started
            if attempt >= 2:
                seconds.append(time.perf_counter() - started)
    generated = output[:, input_ids.shape[1]:]
    characters = sum(len(text) for text in tokenizer.batch_decode(generated, skip_special_tokens=True))
    tokens = generated.numel()
    median = statistics.median(seconds)
    return {"batch_size": float(batch_size), "new_tokens": float(new_tokens), "seconds": median,
            "warm_up_seconds": warm_up, "tokens_per_second": tokens / median,
            "characters_per_second": characters / median, "characters_per_token": characters / tokens}


def side_by_side(contenders: dict, prompts: list[str], *, batches: list[int], new_tokens: int, repeats: int = 3,
                 compiled: bool = True) -> dict[str, dict[str, dict[str, float]]]:
    """``{batch: {name: figures}}`` for every (model, tokenizer) contender, the contenders taking turns per batch
    size, and the speed-up of every contender over the first one (characters per second)."""
    results: dict[str, dict[str, dict[str, float]]] = {}
    for batch_size in batches:
        run = DecodeRun(batch_size, new_tokens, repeats=repeats, compiled=compiled)
        row = {name: static_cache_generation(model, tokenizer, prompts, run)
               for name, (model, tokenizer) in contenders.items()}
        baseline = next(iter(row.values()))
        for figures in row.values():
            figures["characters_per_second_speed_up"] = (figures["characters_per_second"]
                                                         / baseline["characters_per_second"])
            figures["tokens_per_second_ratio"] = figures["tokens_per_second"] / baseline["tokens_per_second"]
        results[str(batch_size)] = row
        print(json.dumps({"batch": batch_size, **{name: {k: round(v, 3) for k, v in figures.items()}
                                                   for name, figures in row.items()}}), flush=True)
    return results


def random_contenders(model_dir: str, extra_rows: int, device: str = "cuda"):
    """The embedded default's shapes with random weights in bf16: the source, and the source with ``extra_rows``
    more vocabulary rows (the expanded model); both read with the source tokenizer (timing only)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    config = AutoConfig.from_pretrained(model_dir)
    torch.manual_seed(0)
    source = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).to(device)
    adapted = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).to(device)
    adapted.resize_token_embeddings(config.vocab_size + extra_rows)
    return {"source shape": (source, tokenizer), f"source + {extra_rows} rows": (adapted, tokenizer)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--random-shapes", action="store_true", help="random weights of the embedded default's shapes")
    parser.add_argument("--extra-rows", type=int, default=5000)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None, help="write the figures to this JSON file")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("generation_speed.py measures CUDA generation: no CUDA device here")
    from vocadapt.platform.assets.embedded import load_assets

    if not args.random_shapes:
        raise SystemExit("without --random-shapes, call side_by_side() with your models (recovery_gpu.py does)")
    contenders = random_contenders(str(load_assets().model_dir), args.extra_rows)
    prompts = ["La capitale d'Italia è", "Once upon a time", "Il documento contiene una tabella con",
               "The following table lists"]
    results = {"compiled static cache": side_by_side(contenders, prompts, batches=args.batches,
                                                     new_tokens=args.new_tokens, repeats=args.repeats),
               "eager dynamic cache": side_by_side(contenders, prompts, batches=args.batches,
                                                   new_tokens=args.new_tokens, repeats=args.repeats, compiled=False),
               "device": torch.cuda.get_device_name(), "torch": torch.__version__}
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
