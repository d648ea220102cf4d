"""The inputs of the SmolLM2-135M quality studies (``benchmarks/salt_study.py``): the demo's Italian tokenizer, the
fastText helper and the held-out documents, each built once and cached under the study's ``--work`` folder.

(They lived in ``benchmarks/init_quality.py`` before it became a thin caller of ``vocadapt leaderboard``.)
"""

from __future__ import annotations

import os
from pathlib import Path

HOME = Path(os.environ.get("VOCADAPT_HOME", Path.home() / ".cache" / "vocadapt"))
MODEL = HOME / "models" / "smollm2-135m"
CORPORA = HOME / "corpora"

def _documents(language: str, count: int) -> list[str]:
    """The first ``count`` non-empty lines of the language's validation split (as the demo reads them)."""
    documents = []
    with open(CORPORA / language / "validation.txt", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                documents.append(line.rstrip("\n"))
                if len(documents) == count:
                    break
    return documents


def _target_tokenizer(arguments, source_tokenizer, corpus: list[str]):
    """The demo's adapted tokenizer (trained once and kept under ``work``) and its replacement record."""
    from transformers import AutoTokenizer

    from vocadapt.components.tokenizers.language_settings import tokenizer_settings_for
    from vocadapt.components.tokenizers.replace import replace_vocabulary
    from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, train_tokenizer

    trained_dir = arguments.work / f"target-{arguments.vocab_size}"
    if not (trained_dir / "tokenizer.json").exists():
        spec = TokenizerTrainingSpec(vocab_size=arguments.vocab_size, min_frequency=2, seed=0, like=source_tokenizer,
                                     **tokenizer_settings_for("it", "bytelevel-bpe"))
        train_tokenizer(corpus, spec, trained_dir, show_progress=False)
    return replace_vocabulary(source_tokenizer, AutoTokenizer.from_pretrained(str(trained_dir)))


def _helper(arguments, target_tokenizer, corpus: list[str]):
    """The helper, trained once and cached under ``work`` (fastText is deterministic with one thread), as
    safetensors: its two tensors, with its kind and description in the file's metadata (no pickle)."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    from vocadapt.components.helpers import TokenVectors, resolve_helper

    cached = arguments.work / f"helper-{arguments.helper.replace(':', '_').replace('/', '_')}.safetensors"
    if cached.exists():
        with safe_open(str(cached), framework="pt") as stored:
            metadata = stored.metadata()
            return TokenVectors(stored.get_tensor("vectors"), stored.get_tensor("known"), metadata["kind"],
                                metadata["description"])
    helper = resolve_helper(arguments.helper, target_tokenizer=target_tokenizer, corpus_files=corpus, seed=0)
    save_file({"vectors": helper.vectors.contiguous(), "known": helper.known.contiguous()}, str(cached),
              metadata={"kind": helper.kind, "description": helper.description})
    return helper
