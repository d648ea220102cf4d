"""How wide are the promotion gates' 95% intervals at a given number of documents and items?

Scores two models on the embedded default's side-by-side items and on out-of-domain text (Debian fortunes), keeps
the per-item parts the gates bootstrap (``pipelines/side_by_side.py::score_model``), and prints, for each gated
measure and several counts (the first n documents or items of the seeded order), the estimate of candidate -
source with its paired 95% interval (``components/evaluation/bootstrap.py``, 1,000 resamples, seed 0), and each
model's own interval. The candidate is the source with its weights rounded to bfloat16 (and back): a real
neighbouring checkpoint of the same tokenizer, so the paired interval shows the noise floor of a decision between
two close models at each count.

    nice -n 10 python benchmarks/gate_noise.py [--documents 32 200 400] [--items 24 48] [--candidate-bpb-only]
        [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, nargs="+", default=[32, 200, 400])
    parser.add_argument("--items", type=int, nargs="+", default=[24, 48])
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--out", default=None)
    parser.add_argument("--candidate-bpb-only", action="store_true",
                        help="score the candidate on the out-of-domain documents only (no generation: a busy 2-core "
                        "machine takes minutes per model for the 24 translations)")
    args = parser.parse_args()

    import torch

    from vocadapt.components.evaluation.bootstrap import ItemParts, bootstrap_interval, paired_bootstrap
    from vocadapt.pipelines.side_by_side import ItemSettings, SourceVocabulary, build_items, score_model
    from vocadapt.platform.assets.embedded import load_assets
    from vocadapt.platform.model_loading import load_model
    from vocadapt.platform.assets.out_of_domain import out_of_domain_documents
    from vocadapt.platform.assets.sources import read_documents

    torch.set_num_threads(2)
    assets = load_assets(languages=("it",))
    model, tokenizer = load_model(assets.model_dir, what="source model")
    neighbour, _ = load_model(assets.model_dir, what="source model")
    with torch.no_grad():
        for parameter in neighbour.parameters():
            parameter.copy_(parameter.to(torch.bfloat16).to(parameter.dtype))
    documents = max(args.documents)
    items = build_items(
        language="it", source_language="en", documents=read_documents((assets.corpus("it", "validation"),)),
        settings=ItemSettings(items=max(args.items), seed=0, max_length=args.max_length),
        parallel=(assets.parallel("it", "test"), assets.parallel("it", "validation")),
        out_of_domain={"target": out_of_domain_documents("it", limit=documents),
                       "source": out_of_domain_documents("en", limit=documents)})
    parts: dict[str, ItemParts] = {}
    started = time.perf_counter()
    score_model(model, tokenizer, items, source=SourceVocabulary(tokenizer), prefix="source_model.",
                item_parts=parts)
    print(f"source model scored in {time.perf_counter() - started:.0f} s", flush=True)
    if args.candidate_bpb_only:
        import math

        from vocadapt.components.evaluation.bootstrap import item_id, ratio_parts
        from vocadapt.components.metrics.bits_per_byte import score_documents

        for stream, texts in items.out_of_domain.items():
            scored = score_documents(neighbour, tokenizer, texts, max_length=items.max_length)
            parts[f"bpb_ood_{stream}"] = ratio_parts([s.nats / math.log(2) for s in scored],
                                                     [s.bytes for s in scored], tuple(map(item_id, texts)))
    else:
        score_model(neighbour, tokenizer, items, source=SourceVocabulary(tokenizer), item_parts=parts)
    seconds = time.perf_counter() - started
    rows = []
    names = {k.removeprefix("source_model.") for k in parts}
    for key in sorted(names):
        reference = parts.get(f"source_model.{key}")
        counts = args.documents if key.startswith("bpb_ood") else args.items
        for count in counts:
            if count > len(parts.get(key) or parts[f"source_model.{key}"]):
                continue
            head = lambda p: ItemParts(p.kind, p.parts[:count], p.ids[:count])  # noqa: E731
            own = parts.get(key)
            row = {"metric": key, "items": count,
                   "source": bootstrap_interval(head(reference)).as_dict() if reference else None,
                   "candidate": bootstrap_interval(head(own)).as_dict() if own else None}
            if reference is not None and own is not None:
                row["difference"] = paired_bootstrap(head(parts[key]), head(reference)).as_dict()
            rows.append(row)
    print(f"scored both models in {seconds:.0f} s")
    print(f"{'metric':58} {'n':>4} {'source [95%]':>26} {'diff [paired 95%]':>28}")
    for row in rows:
        own = row["source"] or row["candidate"]
        diff = row.get("difference")
        print(f"{row['metric']:58} {row['items']:>4} {own['estimate']:8.3f} [{own['low']:7.3f}, {own['high']:7.3f}]"
              + (f" {diff['estimate']:+8.4f} [{diff['low']:+8.4f}, {diff['high']:+8.4f}]" if diff else ""))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump({"seconds": seconds, "rows": rows}, handle, indent=1)


if __name__ == "__main__":
    main()
