"""Initialisers at a model family's real shape: seconds and peak memory of in-memory and streamed surgery, the
code of a baseline commit beside the current one.

The family's real tokenizer is expanded by 300 Italian tokens (``tests/families/family_surgery_world.py``, as the
family tests do) and its source matrices are that module's seeded bf16 matrices at the real shape (Llama-3.1-8B:
128,256 x 4,096, untied). Each (code, path, method) runs in its own process:

- ``memory``: ``adapt_embeddings`` on an embedding-only model holding both matrices (the adapt pipeline's path);
- ``streamed``: ``adapt_checkpoint`` on an embedding-only safetensors checkpoint of the family's shape (what
  ``vocadapt init`` runs), under the default 512 MiB budget.

The child reports its wall seconds for the surgery, the resident memory before it (the source matrices: the
in-memory path's inputs) and its peak (``VmHWM``), and the sha256 of the adapted matrices, so the table says whether
the baseline and the current code wrote the same bytes. The baseline is the ``components/`` folder of ``--baseline``
(``git archive``), imported in place of the working tree's.

    python benchmarks/init_scale_families.py --baseline a9056a0                       # llama3_1, fvt sava
    python benchmarks/init_scale_families.py --baseline a9056a0 --family qwen3 --paths streamed --methods fvt
    python benchmarks/init_scale_families.py --methods all --paths memory               # current code only
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]


def _use_components(folder: str | None) -> None:
    """Import ``vocadapt.components`` from ``folder`` (a baseline's copy) instead of the working tree."""
    if folder:
        import vocadapt.components

        vocadapt.components.__path__ = [folder]


def _vm(field: str) -> float:
    status = Path("/proc/self/status").read_text()
    return round(int(status.split(f"{field}:")[1].split()[0]) / 1024**2, 2)


def _digest(*tensors) -> str:
    import torch

    digest = hashlib.sha256()
    for tensor in tensors:  # 8,192 rows at a time: no copy of a whole matrix
        for first in range(0, tensor.shape[0], 8192):
            digest.update(memoryview(tensor[first : first + 8192].detach().contiguous().view(torch.uint8).numpy()))
    return digest.hexdigest()[:12]


def run_child(args: argparse.Namespace) -> dict:
    sys.path.insert(0, str(ROOT))
    _use_components(args.components)
    from transformers import AutoTokenizer

    from tests.families import family_surgery_world as world
    from vocadapt.components.initializers import get_initializer
    from vocadapt.platform.families.catalogue import model_family

    work = Path(args.work)
    family = model_family(args.family)
    rows, hidden = family.vocab_rows, family.architecture["hidden_size"]
    needs_helper = get_initializer(args.method).needs_helper
    options = None
    if args.method == "wechsel":  # the registry test's tiny fastText models and dictionary
        from tests.initializers.test_registry import OPTIONS

        options = OPTIONS["wechsel"]
    corpus = [str(work / "it-train.txt")]
    if args.path == "memory":
        import torch

        from tests.families.test_family_initializers import embedding_only_model
        from vocadapt.components.surgery import Initialisation, RowLayout, adapt_embeddings

        source = AutoTokenizer.from_pretrained(str(work / "source-tokenizer"))
        target = AutoTokenizer.from_pretrained(str(work / "target"))
        helper = None
        if needs_helper:
            from vocadapt.components.helpers import resolve_helper

            helper = resolve_helper(f"model:{work / 'helper'}", target_tokenizer=target)
        source_input = world.seeded_matrix(rows, hidden, seed=0)
        source_output = None if family.tied else world.seeded_matrix(rows, hidden, seed=1)
        model = embedding_only_model(args.family, source_input, source_output)
        del source_input, source_output  # the model holds them (adapt_embeddings replaces them)
        before = _vm("VmRSS")
        started, cpu = time.perf_counter(), time.process_time()
        with torch.no_grad():
            adapt_embeddings(model, Initialisation(args.method, options=options, seed=3, helper=helper,
                                                   corpus_files=corpus),
                             source_tokenizer=source, target_tokenizer=target, layout=RowLayout("expand"))
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        peak = _vm("VmHWM")
        matrices = [model.get_input_embeddings().weight] + ([] if family.tied else [model.get_output_embeddings().weight])
        digest = _digest(*matrices)
    else:
        from vocadapt.components.surgery import Initialisation, RowLayout, adapt_checkpoint
        from vocadapt.components.surgery.checkpoint import CheckpointWriting

        helper = f"model:{work / 'helper'}" if needs_helper else None
        out = work / f"out-{os.getpid()}"
        before = _vm("VmRSS")
        started, cpu = time.perf_counter(), time.process_time()
        adapt_checkpoint(work / "checkpoint", work / "target", out,
                         Initialisation(args.method, options=options, seed=3, helper=helper, corpus_files=corpus),
                         layout=RowLayout("expand"), writing=CheckpointWriting(link="symlink"))
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        peak = _vm("VmHWM")
        names = ["model.embed_tokens.weight"] + ([] if family.tied else ["lm_head.weight"])
        digest = _digest(*(block for name in names for _, block in world.row_blocks(out, name)))
        shutil.rmtree(out)
        return {"seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1), "before_gb": before, "peak_gb": peak,
                "sha256": digest}
    return {"seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1), "before_gb": before, "peak_gb": peak,
            "sha256": digest}


def prepare(work: Path, family_name: str, paths: list[str]) -> None:
    """The tokenizers, helper, corpus and (streamed) the checkpoint, built once into ``work``."""
    sys.path.insert(0, str(ROOT))
    from tests.families import family_surgery_world as world
    from vocadapt.platform.families.assets import family_tokenizer_dir, fetch_families

    work.mkdir(parents=True, exist_ok=True)
    fetch_families()
    tokenizer = family_tokenizer_dir(family_name)
    if not (work / "target").exists():
        shutil.copytree(tokenizer, work / "source-tokenizer", dirs_exist_ok=True)
        expanded = world.expanded_tokenizer_dir(family_name, str(tokenizer))
        shutil.copytree(world.helper_model_dir(expanded), work / "helper", dirs_exist_ok=True)
        shutil.copytree(expanded, work / "target")
        shutil.copyfile(world.italian_corpus_file(), work / "it-train.txt")
    if "streamed" in paths and not (work / "checkpoint").exists():
        world.write_family_checkpoint(work / "checkpoint", family_name, tokenizer)


def baseline_components(revision: str, into: Path) -> Path:
    """``components/`` as it was at ``revision``."""
    folder = into / f"components-{revision}"
    if not folder.exists():
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, "components"], check=True,
                                 capture_output=True).stdout
        staging = into / f"staging-{revision}"
        staging.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=__import__("io").BytesIO(archive)) as tar:
            tar.extractall(staging, filter="data")
        (staging / "components").rename(folder)
        shutil.rmtree(staging)
    return folder


def measure(args: argparse.Namespace, code: str, components: Path | None, path: str, method: str) -> dict:
    command = [sys.executable, __file__, "--child", "--work", str(args.work.parent), "--family", args.family,
               "--path", path, "--method", method] + (["--components", str(components)] if components else [])
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    row = {"code": code, "path": path, "method": method, "process_seconds": round(time.perf_counter() - started, 1),
           "load_average": round(os.getloadavg()[0], 1)}
    if done.returncode != 0:
        row["error"] = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
        return row
    row.update(json.loads(done.stdout.strip().splitlines()[-1]))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--family", default="llama3_1")
    parser.add_argument("--methods", nargs="*", default=["fvt", "sava"], help="method names, or 'all'")
    parser.add_argument("--paths", nargs="*", default=["memory", "streamed"], choices=["memory", "streamed"])
    parser.add_argument("--baseline", help="a commit whose components/ run beside the working tree's")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "vocadapt-init-scale-families")
    parser.add_argument("--results", type=Path, help="also write the rows as JSON here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--method", help=argparse.SUPPRESS)
    parser.add_argument("--components", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.work = args.work / args.family
    if args.child:
        print(json.dumps(run_child(args)))
        return
    prepare(args.work, args.family, args.paths)
    if args.methods == ["all"]:
        sys.path.insert(0, str(ROOT))
        from vocadapt.components.initializers import available_initializers

        args.methods = available_initializers()
    codes = [("current", None)]
    if args.baseline:
        codes.insert(0, (args.baseline, baseline_components(args.baseline, args.work.parent)))
    rows = []
    for path in args.paths:
        for method in args.methods:
            for code, components in codes:
                rows.append(measure(args, code, components, path, method))
                print(json.dumps(rows[-1]), flush=True)
    print(f"\n{args.family}: surgery wall and CPU seconds / peak GB (resident before it) / sha256")
    print(f"{'path':9} {'method':13} " + "  ".join(f"{code:>42}" for code, _ in codes) + "  same bytes")
    for path in args.paths:
        for method in args.methods:
            cells, digests = [], set()
            for code, _ in codes:
                row = next(r for r in rows if (r["code"], r["path"], r["method"]) == (code, path, method))
                if "error" in row:
                    cells.append(f"{'error':>30}")
                    continue
                digests.add(row["sha256"])
                cells.append(f"{row['seconds']:>6} s {row.get('cpu_seconds', '-'):>6} cpu {row['peak_gb']:>5} GB "
                             f"({row['before_gb']:>4}) {row['sha256'][:6]}")
            same = "yes" if len(digests) == 1 and len(cells) == len(codes) else "-" if len(codes) == 1 else "NO"
            print(f"{path:9} {method:13} " + "  ".join(cells) + f"  {same}")
    if args.results:
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text(json.dumps({"family": args.family, "baseline": args.baseline, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
