"""How long a tokenizer folder that vocadapt wrote takes to load, side by side in one process, on each family's
real tokenizer: saved as transformers 5 saves it, against saved by ``save_tokenizer`` (its added tokens in
tokenizer_config.json too), and that folder loaded by ``load_pretrained_tokenizer`` (Python's cyclic garbage
collector paused for the load).

transformers 5 writes no ``added_tokens_decoder`` into tokenizer_config.json, and loading such a folder parses the
whole tokenizer.json in Python for its added tokens before the Rust tokenizer parses it again. A class with its own
``__init__`` (Gemma-3's, Qwen3's, Llama-2's and Mistral's) builds its vocabulary and merges from the file parsed in
Python: hundreds of thousands of new containers, which start the collector over and over, and its passes over the
older generations walk every object the process holds. The loads run in a process that has imported what an adapt
process imports (torch, transformers, MLflow, the adapt pipeline and LAPT's worker: about 350,000 objects the
collector tracks; ``--bare`` for a process with transformers alone). Each arm loads its folder ``--repeat`` times,
alternating; the best is printed, and whether all loads give the same tokenizer (its backend, added tokens, special
tokens, chat template and ids of one text).

    python benchmarks/tokenizer_loads.py [--families llama3_1 qwen3 gemma3 deepseek_v3 mistral_v1 llama2] [--repeat 3]
        [--bare]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def described(tokenizer) -> tuple:
    """What must be the same whichever way the folder was saved."""
    return (type(tokenizer).__name__, tokenizer.backend_tokenizer.to_str(),
            {token_id: token.__getstate__() for token_id, token in tokenizer.added_tokens_decoder.items()},
            tokenizer.special_tokens_map, tokenizer.chat_template, tokenizer("Il gatto dorme.\n")["input_ids"])


def timed_load(folder: Path, timings: list[float], *, collector_paused: bool = False):
    """Load ``folder`` once (``load_pretrained_tokenizer`` when ``collector_paused``), appending the seconds to
    ``timings``; the tokenizer."""
    from transformers import AutoTokenizer

    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

    started = time.perf_counter()
    tokenizer = load_pretrained_tokenizer(folder) if collector_paused else AutoTokenizer.from_pretrained(str(folder))
    timings.append(time.perf_counter() - started)
    return tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", nargs="+",
                        default=["llama3_1", "qwen3", "gemma3", "deepseek_v3", "mistral_v1", "llama2"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bare", action="store_true", help="import transformers alone, not the adapt pipeline")
    args = parser.parse_args()
    import gc
    import importlib

    if not args.bare:
        for module in ("torch", "mlflow", "vocadapt.pipelines.adapt", "vocadapt.platform.lapt.worker"):
            importlib.import_module(module)
    print(f"objects the collector tracks: {len(gc.get_objects()):,}")

    from transformers import AutoTokenizer

    from vocadapt.components.tokenizers.saving import save_tokenizer
    from vocadapt.platform.families.assets import family_tokenizer_dir

    print("| family | tokens | saved by save_pretrained: load (s) | by save_tokenizer: load (s) | "
          "by save_tokenizer, collector paused: load (s) | same tokenizer |")
    print("| --- | --- | --- | --- | --- | --- |")
    for family in args.families:
        source = AutoTokenizer.from_pretrained(str(family_tokenizer_dir(family)))
        with tempfile.TemporaryDirectory() as scratch:
            plain, saved = Path(scratch, "save_pretrained"), Path(scratch, "save_tokenizer")
            source.save_pretrained(str(plain))
            save_tokenizer(source, saved)
            plain_times: list[float] = []
            saved_times: list[float] = []
            paused_times: list[float] = []
            for _ in range(args.repeat):  # alternating, so a change in the machine's load reaches every arm
                from_plain = timed_load(plain, plain_times)
                from_saved = timed_load(saved, saved_times)
                from_paused = timed_load(saved, paused_times, collector_paused=True)
            same = described(from_plain) == described(from_saved) == described(from_paused)
        print(f"| {family} | {len(source):,} | {min(plain_times):.2f} | {min(saved_times):.2f} | "
              f"{min(paused_times):.2f} | {same} |")


if __name__ == "__main__":
    main()
