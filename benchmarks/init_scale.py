"""Initialisers at Llama-3.1-8B (or 70B) scale: wall time and peak memory of lazy checkpoint surgery, per method.

A synthetic checkpoint with Llama-3.1-8B's embedding shapes (128,256 x 4,096, untied, bf16, random values) is
written as safetensors shards beside a body of two full-size layers (zeros), laid out as Meta's shards are: the
input embeddings share a shard with layer 0, the LM head with the last layer. Its source tokenizer is the embedded
default's (SmolLM2, 49,152 byte-level tokens), so the matrix carries padding rows up to 128,256 (as padded checkpoints
do: the rows past the tokenizer's last id are no token's, and must be kept). It is
replaced by a 32,768-token byte-level BPE trained on the Italian training corpus. Each method runs in its own
process (``adapt_checkpoint``: read the two matrices, initialise, write shards, link the rest); the parent measures
wall time and the child's peak resident memory. Beside them, FVT as public tools write it: a Python loop that
tokenizes each token and averages its rows one at a time.

Goal: FVT within 60 s and 4 GB peak on a 2-core machine; every other method within 5x FVT's time.

``--shape 70b``: Llama-3.1-70B's shapes (128,256 x 8,192, untied bf16; a body of two full-size layers), built under
``<work>-70b``. Goal: <= 4 GB peak and <= 90 s, a peak that does not grow with the vocabulary or hidden size: the
methods registered ``columnwise`` stream the matrices through one float32 column block (``--budget-mb``, default
512), those registered ``row_blocks`` (multivariate, sava) read and write them a chunk of rows at a time; a method
name with ``@whole`` (``fvt@whole``) runs the whole-matrix path instead, for comparison.

    python benchmarks/init_scale.py                 # build once under /tmp/vocadapt-init-scale, run all methods
    python benchmarks/init_scale.py --methods fvt random --skip-loop
    python benchmarks/init_scale.py --shape 70b --methods fvt align merge random_token fvt@whole --skip-loop

``--source-rows N`` and ``--target-vocab N`` change the vocabulary at the same hidden size, to see whether the peak
grows with it: the source matrix gets N rows (the same SmolLM2 tokenizer, padded further; at least 49,152) and the
target BPE N tokens (at most what the corpus yields: the run records the rows it got). A non-default size gets its
own ``source-<N>`` / ``target-<N>`` / ``helper-<N>.vec`` beside the default ones in the same work folder.

    python benchmarks/init_scale.py --shape 70b --source-rows 262144 --methods fvt align --skip-loop
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROWS, HIDDEN, INTERMEDIATE, KV, LAYERS = 128_256, 4_096, 14_336, 1_024, 2
SHAPES = {"8b": (128_256, 4_096, 14_336, 1_024), "70b": (128_256, 8_192, 28_672, 1_024),
          "small": (60_000, 64, 128, 16)}
BUDGET_MB = 512
SHAPE = "8b"
TARGET_VOCAB = 32_768
SOURCE_DIR, TARGET_DIR, HELPER_FILE = "source", "target", "helper.vec"  # others for a non-default vocabulary
HOME = Path(os.environ.get("VOCADAPT_HOME", Path.home() / ".cache" / "vocadapt"))
SOURCE_TOKENIZER = HOME / "models" / "smollm2-135m"
CORPUS = HOME / "corpora" / "it" / "train.txt"
METHODS = ["random", "multivariate", "random_token", "fvt", "merge", "align", "clp", "focus", "sava", "salt", "omp",
           "wechsel"]


def _random_bf16(rows: int, generator) -> "torch.Tensor":
    import torch

    out = torch.empty(rows, HIDDEN, dtype=torch.bfloat16)
    for start in range(0, rows, 8192):
        block = torch.randn(min(8192, rows - start), HIDDEN, generator=generator) * 0.02
        out[start : start + 8192] = block
    return out


def _layer(index: int) -> dict:
    import torch

    prefix = f"model.layers.{index}."
    shapes = {
        "self_attn.q_proj.weight": (HIDDEN, HIDDEN), "self_attn.k_proj.weight": (KV, HIDDEN),
        "self_attn.v_proj.weight": (KV, HIDDEN), "self_attn.o_proj.weight": (HIDDEN, HIDDEN),
        "mlp.gate_proj.weight": (INTERMEDIATE, HIDDEN), "mlp.up_proj.weight": (INTERMEDIATE, HIDDEN),
        "mlp.down_proj.weight": (HIDDEN, INTERMEDIATE), "input_layernorm.weight": (HIDDEN,),
        "post_attention_layernorm.weight": (HIDDEN,),
    }
    return {prefix + name: torch.zeros(shape, dtype=torch.bfloat16) for name, shape in shapes.items()}


def build_checkpoint(folder: Path) -> None:
    """The synthetic source checkpoint: config, source tokenizer, two shards and their index."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoTokenizer, LlamaConfig

    tokenizer = AutoTokenizer.from_pretrained(str(SOURCE_TOKENIZER))
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(str(folder))
    LlamaConfig(
        vocab_size=ROWS, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE, num_hidden_layers=LAYERS,
        num_attention_heads=HIDDEN // 128 if HIDDEN >= 1024 else 4, num_key_value_heads=8 if HIDDEN >= 1024 else 1, tie_word_embeddings=False, rope_theta=500_000.0,
        max_position_embeddings=131_072, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        torch_dtype="bfloat16",
    ).save_pretrained(str(folder))
    generator = torch.Generator().manual_seed(0)
    shards = {  # built one at a time (the same draws in the same order), so only one shard is in memory
        "model-00001-of-00002.safetensors": lambda: {"model.embed_tokens.weight": _random_bf16(ROWS, generator),
                                                     **_layer(0)},
        "model-00002-of-00002.safetensors": lambda: {
            **_layer(1), "model.norm.weight": torch.ones(HIDDEN, dtype=torch.bfloat16),
            "lm_head.weight": _random_bf16(ROWS, generator),
        },
    }
    weight_map, total = {}, 0
    for name, build in shards.items():
        tensors = build()
        save_file(tensors, str(folder / name), metadata={"format": "pt"})
        weight_map.update({tensor: name for tensor in tensors})
        total += sum(t.numel() * t.element_size() for t in tensors.values())
        del tensors
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))


def build_target_tokenizer(folder: Path) -> None:
    """A 32,768-token (``--target-vocab``) byte-level BPE trained on the Italian training corpus."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TARGET_VOCAB, min_frequency=1, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    backend.train([str(CORPUS)], trainer)
    PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<|endoftext|>", eos_token="<|endoftext|>", unk_token=None
    ).save_pretrained(str(folder))


def build_helper(work: Path) -> float:
    """fastText on the corpus tokenized with the target tokenizer, saved as a .vec file; returns its seconds."""
    from transformers import AutoTokenizer

    from vocadapt.components.helpers import resolve_helper
    from vocadapt.components.helpers.fasttext_helper import token_words

    target = AutoTokenizer.from_pretrained(str(work / TARGET_DIR))
    started = time.perf_counter()
    helper = resolve_helper("fasttext:dim=100,epoch=3", target_tokenizer=target, corpus_files=[str(CORPUS)])
    seconds = time.perf_counter() - started
    words = token_words(target)
    known = [token_id for token_id in range(len(words)) if words[token_id] and bool(helper.known[token_id])]
    with open(work / HELPER_FILE, "w", encoding="utf-8") as out:
        out.write(f"{len(known)} {helper.vectors.shape[1]}\n")
        for token_id in known:
            out.write(words[token_id] + " " + " ".join(f"{v:.5f}" for v in helper.vectors[token_id].tolist()) + "\n")
    return seconds


def run_child(work: Path, method: str) -> dict:
    """One measured method in this process (called as a child by the parent)."""
    from vocadapt.components.initializers import get_initializer
    from vocadapt.components.surgery import Initialisation, adapt_checkpoint
    from vocadapt.components.surgery.checkpoint import CheckpointWriting

    if method == "fvt-loop":
        return fvt_python_loop(work)
    name, _, path = method.partition("@")
    helper = f"vectors:{work / HELPER_FILE}" if get_initializer(name).needs_helper else None
    options = None
    if name == "wechsel":  # the English and Italian fastText models and dictionary `vocadapt assets` builds
        from vocadapt.platform.assets.embedded import resolve_wechsel_options

        options = resolve_wechsel_options({}, "en", "it")
    record = adapt_checkpoint(
        work / SOURCE_DIR, work / TARGET_DIR, work / "out" / method,
        Initialisation(name, options=options, helper=helper, corpus_files=[str(CORPUS)]),
        writing=CheckpointWriting(overwrite=True,
                                  memory_budget_bytes=None if path == "whole" else BUDGET_MB * 1024 * 1024),
    )
    return {"copied": record["copied"], "initialised": record["initialised"], "method_seconds": record["method_seconds"],
            "streamed": record["streamed"]}


def fvt_python_loop(work: Path) -> dict:
    """FVT as public tools do it: per token, tokenize its text and average its rows, for both matrices."""
    import torch
    from safetensors import safe_open
    from transformers import AutoTokenizer

    from vocadapt.components.tokenizers import token_overlap

    source_tokenizer = AutoTokenizer.from_pretrained(str(work / SOURCE_DIR))
    target_tokenizer = AutoTokenizer.from_pretrained(str(work / TARGET_DIR))
    overlap = token_overlap(source_tokenizer, target_tokenizer).target_to_source
    index = json.loads((work / SOURCE_DIR / "model.safetensors.index.json").read_text())["weight_map"]
    started = time.perf_counter()
    for name in ("model.embed_tokens.weight", "lm_head.weight"):
        with safe_open(str(work / SOURCE_DIR / index[name]), framework="pt") as handle:
            source = handle.get_tensor(name).float()
        target = torch.zeros(len(target_tokenizer), HIDDEN)
        for token_id in range(len(target_tokenizer)):
            if token_id in overlap:
                target[token_id] = source[overlap[token_id]]
                continue
            text = target_tokenizer.convert_tokens_to_string([target_tokenizer.convert_ids_to_tokens(token_id)])
            pieces = source_tokenizer(text, add_special_tokens=False)["input_ids"]
            if pieces:
                target[token_id] = source[pieces].mean(0)
        del source
    return {"loop_seconds": round(time.perf_counter() - started, 1)}


def measure(work: Path, method: str) -> dict:
    """Run one method in a child process: wall seconds and the child's peak RSS in GB."""
    command = [sys.executable, __file__, "--work", str(work), "--child", method, "--shape", SHAPE,
               "--budget-mb", str(BUDGET_MB), "--source-rows", str(ROWS), "--target-vocab", str(TARGET_VOCAB)]
    started = time.perf_counter()
    import tempfile

    with tempfile.TemporaryFile(mode="w+") as errors:  # a file, not a pipe: a chatty child cannot block on it
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True)
        output = process.stdout.read()
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        if status != 0:  # say why (a full disk, a missing asset), not only that it failed
            errors.seek(0)
            last = errors.read().strip().splitlines()[-1:] or ["no output on stderr"]
            return {"method": method, "error": f"exit status {status}: {last[0][:200]}", "wall_seconds": round(wall, 1)}
    result = json.loads(output.strip().splitlines()[-1])
    import shutil

    shutil.rmtree(work / "out" / method, ignore_errors=True)  # a 70B-shaped output's body shards are GBs
    cpu = usage.ru_utime + usage.ru_stime  # what the load of a shared machine does not stretch
    return {"method": method, "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1),
            "ru_maxrss_gb": round(usage.ru_maxrss / 1024**2, 2), "peak_gb": result.pop("vm_hwm_gb"), **result}


def main() -> None:
    global ROWS, HIDDEN, INTERMEDIATE, KV, SHAPE, BUDGET_MB, TARGET_VOCAB, SOURCE_DIR, TARGET_DIR, HELPER_FILE
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/vocadapt-init-scale"))
    parser.add_argument("--methods", nargs="*", default=METHODS)
    parser.add_argument("--skip-loop", action="store_true", help="Do not run the public-tool FVT loop.")
    parser.add_argument("--small", action="store_true", help="A 60,000 x 64 dry run of the whole benchmark.")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="8b", help="Llama-3.1-8B's or 70B's shapes.")
    parser.add_argument("--budget-mb", type=int, default=BUDGET_MB,
                        help="Float32 column block a columnwise method is streamed through (MiB).")
    parser.add_argument("--source-rows", type=int, help="Rows of the source matrices (default: the shape's).")
    parser.add_argument("--target-vocab", type=int, default=TARGET_VOCAB, help="Tokens of the target BPE.")
    parser.add_argument("--results", type=Path, help="Also write the results JSON here.")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    SHAPE = "small" if arguments.small else arguments.shape
    ROWS, HIDDEN, INTERMEDIATE, KV = SHAPES[SHAPE]
    BUDGET_MB = arguments.budget_mb
    if arguments.source_rows and arguments.source_rows != ROWS:
        ROWS = arguments.source_rows
        SOURCE_DIR = f"source-{ROWS}"
    if arguments.target_vocab != TARGET_VOCAB:
        TARGET_VOCAB = arguments.target_vocab
        TARGET_DIR, HELPER_FILE = f"target-{TARGET_VOCAB}", f"helper-{TARGET_VOCAB}.vec"
    if arguments.child:
        result = run_child(arguments.work, arguments.child)
        # this process's own high-water mark: wait4's ru_maxrss also counts the parent's pages between fork and
        # exec, so a parent that has just built the checkpoint (3.4 GB at 8B) would mask a smaller child
        status = Path("/proc/self/status").read_text()
        result["vm_hwm_gb"] = round(int(status.split("VmHWM:")[1].split()[0]) / 1024**2, 2)
        print(json.dumps(result))
        return
    work = arguments.work if SHAPE != "70b" else arguments.work.with_name(arguments.work.name + "-70b")
    from rich.console import Console
    from rich.table import Table

    from vocadapt.components.initializers import get_initializer

    console = Console()
    setup = {}
    for name, build in ((SOURCE_DIR, build_checkpoint), (TARGET_DIR, build_target_tokenizer)):
        if not (work / name).exists():
            started = time.perf_counter()
            with console.status(f"building {name}"):
                build(work / name)
            setup[name] = round(time.perf_counter() - started, 1)
    needs_helper = any(get_initializer(m.partition("@")[0]).needs_helper for m in arguments.methods)
    if needs_helper and not (work / HELPER_FILE).exists():
        with console.status("training the fastText helper"):
            setup["fasttext_helper"] = round(build_helper(work), 1)
    console.print(f"setup seconds: {setup}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    results = []
    runs = list(arguments.methods) + ([] if arguments.skip_loop else ["fvt-loop"])
    for method in runs:
        load_before = round(os.getloadavg()[0], 1)
        with console.status(f"running {method}"):
            results.append(measure(work, method))
        results[-1]["load_average"] = round(os.getloadavg()[0], 1)
        results[-1]["load_average_before"] = load_before
        console.print(results[-1])
    fvt_wall = next((r["wall_seconds"] for r in results if r["method"] == "fvt" and "error" not in r), None)
    table = Table("method", "wall s", "CPU s", "peak GB", "method s (input, head)", "x FVT", "goal",
                  title=f"{SHAPE}: {ROWS:,} x {HIDDEN:,}, untied bf16, target BPE {TARGET_VOCAB:,}")
    for row in results:
        ratio = round(row["wall_seconds"] / fvt_wall, 2) if fvt_wall else None
        if SHAPE == "70b":
            goal = "ok" if row["wall_seconds"] <= 90 and row.get("peak_gb", 99) <= 4 else "MISSED (90 s, 4 GB)"
        elif row["method"] == "fvt":
            goal = "ok" if row["wall_seconds"] <= 60 and row.get("peak_gb", 99) <= 4 else "MISSED (60 s, 4 GB)"
        elif row["method"] == "fvt-loop":
            goal = "reference"
        else:
            goal = "ok" if ratio is not None and ratio <= 5 else "MISSED (5x FVT)"
        seconds = row.get("method_seconds") or row.get("loop_seconds") or row.get("error")
        table.add_row(row["method"], str(row["wall_seconds"]), str(row.get("cpu_seconds")), str(row.get("peak_gb")),
                      str(seconds), str(ratio), goal)
    console.print(table)
    default = SOURCE_DIR == "source" and TARGET_DIR == "target"
    summary = json.dumps({"shape": SHAPE, "source_rows": ROWS, "hidden": HIDDEN, "target_vocab": TARGET_VOCAB,
                          "budget_mb": BUDGET_MB, "setup": setup, "results": results}, indent=2)
    (work / ("results.json" if default else f"results-{ROWS}-{TARGET_VOCAB}.json")).write_text(summary)
    if arguments.results:
        arguments.results.parent.mkdir(parents=True, exist_ok=True)
        arguments.results.write_text(summary)


if __name__ == "__main__":
    main()
