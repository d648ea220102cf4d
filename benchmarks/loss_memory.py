"""Peak memory of the next-token loss, forward and backward: full logits against slab by slab, side by side.

The plain path (``F.cross_entropy`` on ``head(hidden)``) materialises the ``batch x length x vocabulary`` logits
and keeps them (and their softmax) for the backward pass. ``components.training.token_logprobs.causal_lm_loss``
computes the same loss a slab of positions at a time and checkpoints each slab, so only one slab's logits exist at
any moment. Each measurement runs in its own process; peak memory is the process's maximum resident set size above
what it held once its inputs were built (CPU), or ``torch.cuda.max_memory_allocated`` on a GPU. Also checks that
the two paths give the same loss and gradients.

    python benchmarks/loss_memory.py [--vocabulary 128256] [--hidden 2048] [--batch 2] [--lengths 512 1024 2048]
        [--slab 256]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(path: str, vocabulary: int, hidden: int, batch: int, length: int, slab: int) -> dict:
    import torch
    import torch.nn.functional as F

    from vocadapt.components.training.token_logprobs import causal_lm_loss

    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    head = torch.nn.Linear(hidden, vocabulary, bias=False, device=device)
    hidden_states = torch.randn(batch, length, hidden, device=device, requires_grad=True)
    ids = torch.randint(0, vocabulary, (batch, length), device=device)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated() / 2**20
    else:
        base = _peak_mib()
    started = time.perf_counter()
    if path == "full":
        logits = head(hidden_states[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
    else:
        loss = causal_lm_loss(hidden_states, head, ids, slab=slab)
    loss.backward()
    seconds = time.perf_counter() - started
    peak = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else _peak_mib()
    return {"path": path, "length": length, "peak_mib_above_inputs": peak - base, "seconds": seconds,
            "loss": float(loss.detach()), "grad_norm": float(hidden_states.grad.norm()), "device": device}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocabulary", type=int, default=128256)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--lengths", type=int, nargs="+", default=[512, 1024, 2048])
    parser.add_argument("--slab", type=int, default=256)
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        path, length = json.loads(args.one)
        print(json.dumps(measure(path, args.vocabulary, args.hidden, args.batch, length, args.slab)))
        return 0
    rows = []
    for length in args.lengths:
        for path in ("full", "slabs"):
            command = [sys.executable, __file__, *(sys.argv[1:] if argv is None else argv),
                       "--one", json.dumps([path, length])]
            completed = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True)
            rows.append(json.loads(completed.stdout.strip().splitlines()[-1]))
    print(f"next-token loss, forward + backward: vocabulary {args.vocabulary:,}, hidden {args.hidden}, batch "
          f"{args.batch}, slab {args.slab} positions, on {rows[0]['device']}")
    print(f"{'length':>7} {'logits GiB':>11} {'full MiB':>10} {'slabs MiB':>10} {'full s':>8} {'slabs s':>8} "
          f"{'same loss':>10} {'same grad':>10}")
    for full, slabs in zip(rows[::2], rows[1::2]):
        logits_gib = args.batch * (full["length"] - 1) * args.vocabulary * 4 / 2**30
        same_loss = abs(full["loss"] - slabs["loss"]) < 1e-4
        same_grad = abs(full["grad_norm"] - slabs["grad_norm"]) < 1e-4 * max(1.0, full["grad_norm"])
        print(f"{full['length']:>7} {logits_gib:>11.2f} {full['peak_mib_above_inputs']:>10.0f} "
              f"{slabs['peak_mib_above_inputs']:>10.0f} {full['seconds']:>8.2f} {slabs['seconds']:>8.2f} "
              f"{str(same_loss):>10} {str(same_grad):>10}")
    print("baseline: the full-logits path (F.cross_entropy on head(hidden)), measured in the same run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
