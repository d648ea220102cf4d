"""A gate's candidate - source difference on consecutive blocks of its items, from the per-item parts an adapt logs
(``gates/items.json`` of the parent run for the source model, of the method's run for the candidate): how much
a default-sized sample (the first 200 out-of-domain paragraphs) can differ from the rest of a larger one. Ratio
metrics (bits per byte: bits over bytes) are pooled over each block, as the gate pools them.

    python benchmarks/gate_blocks.py SOURCE_ITEMS CANDIDATE_ITEMS [--metric bpb_ood_target] [--block 200]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def block_differences(source: dict, candidate: dict, block: int) -> list[tuple[int, int, float, float]]:
    """(first item, items, source value, candidate - source) for each block, in the logged order of the items."""
    if source["ids"] != candidate["ids"]:
        raise SystemExit("the two files score different items: give the parent run's and its method's own")

    def value(parts: list, first: int, last: int) -> float:
        chosen = parts[first:last]
        if source["kind"] == "ratio":
            return sum(part[0] for part in chosen) / sum(part[1] for part in chosen)
        return sum(chosen) / len(chosen)

    rows = []
    for first in range(0, len(source["ids"]), block):
        last = min(first + block, len(source["ids"]))
        reference = value(source["parts"], first, last)
        rows.append((first, last - first, reference, value(candidate["parts"], first, last) - reference))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source_items", type=Path)
    parser.add_argument("candidate_items", type=Path)
    parser.add_argument("--metric", default="bpb_ood_target", help="the candidate's metric; the source's is "
                        "source_model.<metric>")
    parser.add_argument("--block", type=int, default=200)
    args = parser.parse_args()
    source = json.loads(args.source_items.read_text())["items"][f"source_model.{args.metric}"]
    candidate = json.loads(args.candidate_items.read_text())["items"][args.metric]
    print(f"{args.metric}: candidate - source by blocks of {args.block} items (in the order the adapt scored them)")
    print("| items | source | candidate - source |")
    print("| --- | --- | --- |")
    for first, count, reference, difference in block_differences(source, candidate, args.block):
        print(f"| {first + 1}-{first + count} | {reference:.4f} | {difference:+.4f} |")
    (_, count, reference, difference), = block_differences(source, candidate, len(source["ids"]))
    print(f"| all {count} | {reference:.4f} | {difference:+.4f} |")


if __name__ == "__main__":
    main()
