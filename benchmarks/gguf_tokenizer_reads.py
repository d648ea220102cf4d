"""What the GGUF export spends reading each family's real tokenizer besides llama.cpp's converter, as shipped
against the reads it made before, side by side in one process.

Two reads changed (``components/export/gguf.py``): the llama.cpp name of the pre-tokenizer (``_known_pre_tokenizer``)
parsed tokenizer.json twice, now once; the probe texts' Unicode form (``_normalizer_types``) serialised and parsed
the whole tokenizer to read its normalizer, now the normalizer alone. Each arm runs ``--repeat`` times, alternating;
the best is printed, with the answers of both arms (they must agree).

    python benchmarks/gguf_tokenizer_reads.py [--families gemma3 qwen3 llama3_1 deepseek_v3] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def known_pre_tokenizer_before(model_dir: Path):
    """The read as it was: the model type from one parse, the fingerprint from a second."""
    from vocadapt.components.export.gguf import KNOWN_PRE_TOKENIZERS, pre_tokenizer_fingerprint

    path = Path(model_dir) / "tokenizer.json"
    if not path.is_file() or json.loads(path.read_text(encoding="utf-8"))["model"].get("type") != "BPE":
        return None
    return KNOWN_PRE_TOKENIZERS.get(pre_tokenizer_fingerprint(model_dir)[0])


def normalizer_types_before(tokenizer) -> set[str]:
    """The read as it was: the whole tokenizer serialised and parsed for its normalizer."""
    from vocadapt.components.export.gguf import normalizer_node_types

    return normalizer_node_types(json.loads(tokenizer.backend_tokenizer.to_str()).get("normalizer"))


def timed(function, argument):
    """(seconds, answer) of one call."""
    started = time.perf_counter()
    answer = function(argument)
    return time.perf_counter() - started, answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", nargs="+", default=["gemma3", "qwen3", "llama3_1", "deepseek_v3"])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from transformers import AutoTokenizer

    from vocadapt.components.export.gguf import _known_pre_tokenizer, _normalizer_types
    from vocadapt.platform.families.assets import family_tokenizer_dir

    print("| family | pre-tokenizer name, before (s) | shipped (s) | normalizer types, before (s) | shipped (s) | "
          "answers agree |")
    print("| --- | --- | --- | --- | --- | --- |")
    for family in args.families:
        folder = family_tokenizer_dir(family)
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        timings, answers = [], []
        for before, shipped, argument in ((known_pre_tokenizer_before, _known_pre_tokenizer, folder),
                                          (normalizer_types_before, _normalizer_types, tokenizer)):
            old, new = [], []
            for _ in range(args.repeat):  # alternating, so a change in the machine's load reaches both arms
                old.append(timed(before, argument))
                new.append(timed(shipped, argument))
            timings += [min(s for s, _ in old), min(s for s, _ in new)]
            answers.append(old[0][1] == new[0][1])
        print(f"| {family} | {timings[0]:.2f} | {timings[1]:.2f} | {timings[2]:.2f} | {timings[3]:.4f} | "
              f"{all(answers)} |")


if __name__ == "__main__":
    main()
