"""SALT's defaults, studied: zero-shot held-out bits per byte of SmolLM2-135M with the demo's Italian tokenizer for a
grid of SALT settings, beside FVT and Random as the references measured in the same run.

SALT (§3, step 4) fits, per new token, a least-squares map from helper space to source space on its sparsemax
neighbours and takes the minimum-norm solution (a pseudo-inverse). With the offline fastText helper (100
dimensions) and a few dozen neighbours the system is under-determined, so the row is a combination of the
neighbours' source rows with coefficients that need not sum to one. The grid varies what controls that:

- ``ridge``: Tikhonov damping, a fraction of the mean diagonal of each neighbourhood's Gram matrix;
- ``max_neighbours``: the most neighbours one map is fitted on (more than the helper's dimension makes the fit
  over-determined);
- ``temperature``: divides the cosine similarities before sparsemax (higher keeps more neighbours);
- ``intercept``: a constant helper coordinate (as a multiple of the anchors' RMS norm), which makes the map affine.

Same tokenizer, helper and documents as the earlier ``benchmarks/init_quality.py`` (now
``benchmarks/quality_inputs.py``; its ``--work`` cache is reused).

    python benchmarks/salt_study.py [--work /tmp/vocadapt-init-quality] [--ridge ...] [--intercept ...]
        [--max-neighbours ...] [--temperature ...] [--documents 16] [--offset 0] [--json salt.json]
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import itertools
import json
import sys
import time
from pathlib import Path

QUALITY = Path(__file__).with_name("quality_inputs.py")


def _quality_module():
    spec = importlib.util.spec_from_file_location("init_quality", QUALITY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/vocadapt-init-quality"))
    parser.add_argument("--ridge", type=float, nargs="+", default=[1e-2, 1e-1, 1.0, 10.0])
    parser.add_argument("--max-neighbours", type=int, nargs="+", default=[64])
    parser.add_argument("--temperature", type=float, nargs="+", default=[1.0])
    parser.add_argument("--intercept", type=float, nargs="+", default=[0.0])
    parser.add_argument("--documents", type=int, default=16)
    parser.add_argument("--offset", type=int, default=0,
                        help="skip this many held-out documents first (0: init_quality's; 16 or more: a check on "
                             "documents the defaults were not chosen on)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    quality = _quality_module()

    import torch
    from rich.console import Console
    from rich.table import Table
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vocadapt.components.metrics.bits_per_byte import bits_per_byte
    from vocadapt.components.surgery import Initialisation, RowLayout, adapt_embeddings

    torch.set_num_threads(2)
    console = Console()
    args.work.mkdir(parents=True, exist_ok=True)
    settings = argparse.Namespace(work=args.work, vocab_size=16_384, helper="fasttext")
    corpus = [str(quality.CORPORA / "it" / "train.txt")]
    source_tokenizer = AutoTokenizer.from_pretrained(str(quality.MODEL))
    source_model = AutoModelForCausalLM.from_pretrained(str(quality.MODEL), dtype=torch.float32).eval()
    replacement = quality._target_tokenizer(settings, source_tokenizer, corpus)
    helper = quality._helper(settings, replacement.tokenizer, corpus)
    documents = {language: quality._documents(language, args.offset + args.documents)[args.offset:]
                 for language in ("it", "en")}
    source_norm = float(source_model.get_input_embeddings().weight.norm(dim=1).mean())
    new_ids = torch.as_tensor(list(replacement.new_token_ids))

    def run(method: str, options: dict) -> dict:
        started = time.perf_counter()
        model = adapt_embeddings(
            copy.deepcopy(source_model),
            Initialisation(method, options=options, helper=helper if method == "salt" else None, corpus_files=corpus),
            source_tokenizer=source_tokenizer, target_tokenizer=replacement.tokenizer,
            layout=RowLayout(target_to_source=replacement.target_to_source, new_target_ids=replacement.new_token_ids),
        )
        seconds = time.perf_counter() - started
        norms = model.get_input_embeddings().weight.detach()[new_ids].norm(dim=1)
        row = {"method": method, **options, "init_seconds": round(seconds, 1),
               "new_row_norm_median": round(float(norms.median()), 3),
               "new_rows_above_5x": int((norms > 5 * source_norm).sum())}
        row.update({language: round(bits_per_byte(model, replacement.tokenizer, texts, max_length=128, batch_size=8), 4)
                    for language, texts in documents.items()})
        console.print(row)
        return row

    rows = [run("random", {}), run("fvt", {})]
    for ridge, neighbours, temperature, intercept in itertools.product(
        args.ridge, args.max_neighbours, args.temperature, args.intercept
    ):
        rows.append(run("salt", {"ridge": ridge, "max_neighbours": neighbours, "temperature": temperature,
                                 "intercept": intercept}))
        if args.json:
            args.json.write_text(json.dumps({"source_row_norm_mean": source_norm, "rows": rows}, indent=2))
    table = Table("method", "ridge", "max_neighbours", "temperature", "intercept", "median norm", "> 5x",
                  "it bpb", "en bpb", title=f"SALT settings, zero-shot (source row norm {source_norm:.2f})")
    for row in rows:
        table.add_row(row["method"], *(str(row.get(key, "")) for key in ("ridge", "max_neighbours", "temperature",
                                                                          "intercept")),
                      f"{row['new_row_norm_median']:.2f}", str(row["new_rows_above_5x"]), f"{row['it']:.3f}",
                      f"{row['en']:.3f}")
    console.print(table)
    print("baselines measured in the same run: random and fvt (the first two rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
