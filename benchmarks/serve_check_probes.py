"""The serve check's probe texts encoded, side by side in one process, on each family's real tokenizer with a few
added tokens (what an expansion adds): one tokenizer call per text, as ``probe_cases`` encoded them before, against
``probe_cases`` now (every text in one batch call a side, with Python's cyclic garbage collector paused:
``components/collector.py``). The process first imports what an adapt process imports (torch, transformers, MLflow,
the adapt pipeline), so the collector has as many objects to walk as in ``vocadapt adapt``'s registration. Each arm
runs ``--repeat`` times, alternating; the median and the best are printed (a full collection comes every few runs,
so the best alone hides it), and whether both give the same cases.

    python benchmarks/serve_check_probes.py [--families gemma3 llama3_1 qwen3 deepseek_v3] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

ADDED = ["città", "perché", " però"]


def cases_a_call_per_text(tokenizer) -> list[dict]:
    """The baseline: ``probe_cases`` as it was, a tokenizer call per text and side, the collector running."""
    from vocadapt.platform.serving.serve_check import PROBES, _text_boundary

    specials = set(tokenizer.all_special_tokens)
    added = [token for token in tokenizer.get_added_vocab() if token not in specials]
    texts = list(PROBES) + [text for token in added for text in (f"prima {token} dopo", f"{token}{token} e {token}.")]
    cases = []
    for text in texts:
        ids = list(tokenizer(text)["input_ids"])
        plain = list(tokenizer(text, add_special_tokens=False)["input_ids"])
        prefix = next((index for index in range(len(ids)) if ids[index:] == plain[: len(ids) - index]), 0)
        for split in sorted({prefix, _text_boundary(tokenizer, ids, prefix + (len(ids) - prefix) // 2)}):
            cases.append({"text": text, "prompt_ids": ids[:split], "output_ids": ids[split:], "plain_ids": plain})
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", nargs="+", default=["gemma3", "llama3_1", "qwen3", "deepseek_v3"])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    import gc

    import mlflow  # noqa: F401  (what an adapt process holds)

    import vocadapt.pipelines.adapt  # noqa: F401
    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer
    from vocadapt.platform.families.assets import family_tokenizer_dir
    from vocadapt.platform.serving.serve_check import probe_cases

    print(f"objects the collector tracks: {len(gc.get_objects()):,}")
    print(f"{'family':12s} {'texts':>6s} {'a call per text: median, best':>30s} {'probe_cases: median, best':>26s}"
          "  same cases")
    for name in args.families:
        tokenizer = load_pretrained_tokenizer(str(family_tokenizer_dir(name)))
        tokenizer.add_tokens(ADDED)
        timings = {"baseline": [], "now": []}
        for _ in range(args.repeat):
            for arm, function in (("baseline", cases_a_call_per_text), ("now", probe_cases)):
                started = time.perf_counter()
                cases = function(tokenizer)
                timings[arm].append(time.perf_counter() - started)
                if arm == "baseline":
                    baseline_cases = cases
        same = baseline_cases == cases
        texts = len({case["text"] for case in cases})
        shown = {arm: f"{statistics.median(values):.2f} s, {min(values):.2f} s" for arm, values in timings.items()}
        print(f"{name:12s} {texts:6d} {shown['baseline']:>30s} {shown['now']:>26s}  {same}")


if __name__ == "__main__":
    main()
