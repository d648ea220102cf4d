"""Same inputs and seed, same bytes, across processes: every method, in another Python process whose string hashing
differs (PYTHONHASHSEED), writes the very same matrices. The registry test checks two runs in one process, which
cannot see an order that depends on hashing (a set of strings, a dict built from one) or state a cache carries over.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.initializers.test_registry import OPTIONS
from tests.initializers.tiny_world import tiny_llama
from vocadapt.components.initializers import available_initializers, get_initializer

REPO = Path(__file__).resolve().parents[2]


def matrix_digests(folder: str) -> dict[str, str]:
    """sha256 of the adapted input embeddings and LM head, per method and mode, for the world saved in ``folder``
    (tokenizers, helper vectors and corpus written by the test), on an untied model."""
    from transformers import AutoTokenizer

    from vocadapt.components.helpers import TokenVectors
    from vocadapt.components.surgery import Initialisation, RowLayout, adapt_embeddings

    world = Path(folder)
    source = AutoTokenizer.from_pretrained(str(world / "source"))
    from safetensors import safe_open

    with safe_open(str(world / "helper.safetensors"), framework="pt") as stored:  # no pickle between processes
        helper = TokenVectors(stored.get_tensor("vectors"), stored.get_tensor("known"), **stored.metadata())
    digests = {}
    for mode in ("replace", "expand"):
        target = AutoTokenizer.from_pretrained(str(world / mode))
        for method in available_initializers():
            model = adapt_embeddings(
                tiny_llama(len(source), tied=False),
                Initialisation(method, options=OPTIONS.get(method), seed=5, corpus_files=[str(world / "italian.txt")],
                               helper=helper if get_initializer(method).needs_helper else None),
                source_tokenizer=source, target_tokenizer=target, layout=RowLayout(mode),
            )
            digest = hashlib.sha256()
            for matrix in (model.get_input_embeddings().weight, model.get_output_embeddings().weight):
                digest.update(matrix.detach().contiguous().numpy().tobytes())
            digests[f"{mode}/{method}"] = digest.hexdigest()
    return digests


def test_every_method_writes_the_same_bytes_in_another_process(
    tmp_path, source_tokenizer, target_tokenizer, expanded_tokenizer, fasttext_helper, corpus_file
):
    source_tokenizer.save_pretrained(tmp_path / "source")
    target_tokenizer.save_pretrained(tmp_path / "replace")
    expanded_tokenizer.save_pretrained(tmp_path / "expand")
    from safetensors.torch import save_file

    save_file({"vectors": fasttext_helper.vectors.contiguous(), "known": fasttext_helper.known.contiguous()},
              str(tmp_path / "helper.safetensors"),
              metadata={"kind": fasttext_helper.kind, "description": fasttext_helper.description})
    (tmp_path / "italian.txt").write_text(Path(corpus_file).read_text(encoding="utf-8"), encoding="utf-8")
    here = matrix_digests(str(tmp_path))
    code = (
        "import json, sys; from tests.initializers.test_determinism import matrix_digests; "
        f"print(json.dumps(matrix_digests({str(tmp_path)!r})))"
    )
    hash_seed = "1" if os.environ.get("PYTHONHASHSEED") != "1" else "2"
    environment = {**os.environ, "PYTHONHASHSEED": hash_seed, "HF_HUB_OFFLINE": "1"}
    child = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=environment, capture_output=True, text=True,
                           check=False)
    assert child.returncode == 0, child.stderr[-3000:]
    there = json.loads(child.stdout.strip().splitlines()[-1])
    assert len(here) == 2 * len(available_initializers())
    assert {key for key in here if here[key] != there[key]} == set()
