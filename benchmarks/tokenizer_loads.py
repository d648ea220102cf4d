"""How long a tokenizer folder that vocadapt wrote takes to load, side by side in one process, on each family's
real tokenizer: saved as transformers 5 saves it, against saved by ``save_tokenizer`` (its added tokens in
tokenizer_config.json too), and that folder loaded by ``load_pretrained_tokenizer`` (Python's cyclic garbage
collector paused for the load); and its tokenizer.json parsed by ``json.loads`` against ``parse_json`` (the collector
paused: ``components/collector.py``).

transformers 5 writes no ``added_tokens_decoder`` into tokenizer_config.json, and loading such a folder parses the
whole tokenizer.json in Python for its added tokens before the Rust tokenizer parses it again. A class with its own
``__init__`` (Gemma-3's, Qwen3's, Llama-2's and Mistral's) builds its vocabulary and merges from the file parsed in
Python: hundreds of thousands of new containers, which start the collector over and over, and its passes over the
older generations walk every object the process holds. The loads run in a process that has imported what an adapt
process imports (torch, transformers, MLflow, the adapt pipeline and LAPT's worker: about 350,000 objects the
collector tracks; ``--bare`` for a process with transformers alone). Each arm loads its folder ``--repeat`` times,
alternating; the best is printed, and whether each load gives the source's tokenizer (its backend, added tokens,
special tokens, chat template and ids of texts with special tokens: a folder saved by ``save_pretrained`` loses
Mistral's ``legacy`` setting, so it splits text after ``<s>`` otherwise).

    python benchmarks/tokenizer_loads.py [--families llama3_1 qwen3 gemma3 deepseek_v3 mistral_v1 llama2] [--repeat 3]
        [--bare]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def described(tokenizer) -> tuple:
    """What must be the same whichever way the folder was saved."""
    return (type(tokenizer).__name__, tokenizer.backend_tokenizer.to_str(),
            {token_id: token.__getstate__() for token_id, token in tokenizer.added_tokens_decoder.items()},
            tokenizer.special_tokens_map, tokenizer.chat_template,
            tokenizer(["Il gatto dorme.\n", "<s>Ciao</s> mondo"])["input_ids"])


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

    from vocadapt.components.collector import parse_json
    from vocadapt.components.tokenizers.saving import save_tokenizer
    from vocadapt.platform.families.assets import family_tokenizer_dir

    print("| family | tokens | saved by save_pretrained: load (s) | by save_tokenizer: load (s) | "
          "by save_tokenizer, collector paused: load (s) | its tokenizer.json, json.loads (s) | parse_json (s) | "
          "the source's tokenizer: save_pretrained / save_tokenizer / paused |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for family in args.families:
        source = AutoTokenizer.from_pretrained(str(family_tokenizer_dir(family)))
        with tempfile.TemporaryDirectory() as scratch:
            plain, saved = Path(scratch, "save_pretrained"), Path(scratch, "save_tokenizer")
            source.save_pretrained(str(plain))
            save_tokenizer(source, saved)
            text = (saved / "tokenizer.json").read_text(encoding="utf-8")
            times: dict[str, list[float]] = {arm: [] for arm in ("plain", "saved", "paused", "json", "parse_json")}
            for _ in range(args.repeat):  # alternating, so a change in the machine's load reaches every arm
                from_plain = timed_load(plain, times["plain"])
                from_saved = timed_load(saved, times["saved"])
                from_paused = timed_load(saved, times["paused"], collector_paused=True)
                for arm, parse in (("json", json.loads), ("parse_json", parse_json)):
                    started = time.perf_counter()
                    parse(text)
                    times[arm].append(time.perf_counter() - started)
            same = " / ".join(str(described(loaded) == described(source))
                              for loaded in (from_plain, from_saved, from_paused))
        best = {arm: f"{min(values):.2f}" for arm, values in times.items()}
        print(f"| {family} | {len(source):,} | {best['plain']} | {best['saved']} | {best['paused']} | {best['json']} | "
              f"{best['parse_json']} | {same} |")

if __name__ == "__main__":
    main()
