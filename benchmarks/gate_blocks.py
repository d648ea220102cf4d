"""A gate's candidate - source difference on consecutive blocks of its items, from the per-item parts an adapt logs
(``gates/items.json`` of the parent run for the source model, of the method's run for the candidate): how much
a default-sized sample (the first 200 out-of-domain paragraphs) can differ from the rest of a larger one. Ratio
metrics (bits per byte: bits over bytes) are pooled over each block, as the gate pools them, and each block's
difference has its paired bootstrap interval (the gate's own, ``vocadapt.components.evaluation.bootstrap``).

    python benchmarks/gate_blocks.py SOURCE_ITEMS CANDIDATE_ITEMS [--metric bpb_ood_target] [--block 200]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from vocadapt.components.evaluation.bootstrap import Interval, ItemParts, check_paired, paired_bootstrap, parts_from_json


def block_differences(source: ItemParts, candidate: ItemParts, block: int) -> list[tuple[int, int, float, Interval]]:
    """(first item, items, source value, candidate - source with its paired bootstrap interval) for each block, in
    the logged order of the items; each block's value as the gate computes it for the metric's kind (a ratio pooled
    over the block's items, chrF from its summed statistics)."""
    check_paired(candidate, source)
    rows = []
    for first in range(0, len(source), block):
        chosen = slice(first, min(first + block, len(source)))
        reference = ItemParts(source.kind, source.parts[chosen], source.ids[chosen])
        rows.append((first, len(reference), float(reference.value()),
                     paired_bootstrap(ItemParts(candidate.kind, candidate.parts[chosen], candidate.ids[chosen]),
                                      reference)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source_items", type=Path)
    parser.add_argument("candidate_items", type=Path)
    parser.add_argument("--metric", default="bpb_ood_target", help="the candidate's metric; the source's is "
                        "source_model.<metric>")
    parser.add_argument("--block", type=int, default=200)
    args = parser.parse_args()
    source = parts_from_json(json.loads(args.source_items.read_text())["items"][f"source_model.{args.metric}"])
    candidate = parts_from_json(json.loads(args.candidate_items.read_text())["items"][args.metric])
    print(f"{args.metric}: candidate - source by blocks of {args.block} items (in the order the adapt scored them), "
          "with the paired bootstrap's 95% interval")
    print("| items | source | candidate - source |")
    print("| --- | --- | --- |")
    for first, count, reference, difference in block_differences(source, candidate, args.block):
        print(_row(f"{first + 1}-{first + count}", reference, difference))
    (_, count, reference, difference), = block_differences(source, candidate, len(source))
    print(_row(f"all {count}", reference, difference))


def _row(items: str, reference: float, difference: Interval) -> str:
    return (f"| {items} | {reference:.4f} | {difference.estimate:+.4f} "
            f"[{difference.low:+.4f}, {difference.high:+.4f}] |")


if __name__ == "__main__":
    main()
