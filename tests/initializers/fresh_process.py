"""fastText helpers trained in a fresh Python process, for the tests that compare two trainings byte for byte.

In the full suite on two workers (fresh clones of 80d33a9 and 0c8a50b), two such comparisons failed: the same file,
seed and settings gave other vectors in a worker that had run other test files first. They pass alone, beside
CPU-bound processes, and after the in-process LAPT tests; the cause is not found (DEVELOPERS.md, "Tests"). Here the
trainings being compared run one after another in a new process, as a user's run does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

SCRIPT = """
import json, sys
import torch
from transformers import AutoTokenizer
from vocadapt.components.helpers import resolve_helper

folder, calls = sys.argv[1], json.loads(sys.argv[2])
tokenizer = AutoTokenizer.from_pretrained(folder)
for index, call in enumerate(calls):
    helper = resolve_helper(call["spec"], target_tokenizer=tokenizer, corpus_files=call["corpus_files"],
                            seed=call.get("seed", 0))
    torch.save({"vectors": helper.vectors, "description": helper.description}, f"{folder}/helper-{index}.pt")
"""


def helpers_in_a_fresh_process(tokenizer, calls: list[dict], folder: Path) -> list[dict]:
    """``resolve_helper(call["spec"], corpus_files=call["corpus_files"], seed=call.get("seed", 0))`` for each call,
    in order, in one new process with ``tokenizer`` saved to ``folder``; [{"vectors", "description"}, ...]."""
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(folder)
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", SCRIPT, str(folder), json.dumps(calls)], check=True, cwd=root,
                   timeout=600)
    return [torch.load(folder / f"helper-{index}.pt", weights_only=True) for index in range(len(calls))]
