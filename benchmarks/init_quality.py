"""Quality of every initialiser: SmolLM2-135M with the demo's Italian tokenizer, held-out bits per byte, zero-shot
and after a fixed short LAPT.

The embedded default (SmolLM2-135M, English-first, byte-level BPE, tied head) gets its vocabulary replaced by the
demo's target tokenizer (configs/italian-smollm2.yaml: a 16,384-token byte-level BPE trained on the Italian
training corpus, made to speak to the source model by ``replace_vocabulary``). Each method initialises the new rows
(the helper-based ones read a fastText helper trained on the same corpus, the offline default, built once when the
first of them comes up). Two phases, so that a run cut short still has the first table:

1. zero-shot: every adapted model is scored on the same Italian and English held-out documents (the first
   ``--documents`` non-empty lines of each validation split) in bits per byte (comparable across tokenizers,
   unlike per-token loss, which is higher for a model with fewer, longer tokens);
2. LAPT: every method is initialised again (checked identical byte for byte), trained by the same short LAPT (the
   demo's: full model, 4 x 64-token packed sequences per step, 75% Italian / 25% English, peak learning rate 3e-4
   after 2 warm-up steps, cosine; the methods share one tokenizer, so they see the same batches in the same order)
   and scored again. The training loss of every step is recorded (a miniature of SAVA's Figure 6).

Reference rows: the unadapted source model, and (last) the source model after the same LAPT with its own tokenizer
(SAVA's "LAPT" baseline: the same documents, but the same number of *tokens* covers less Italian text).
On 2 idle cores the defaults should take about 30 minutes (estimated from CPU time); a loaded machine stretches
that several times.

    nice -n 5 python benchmarks/init_quality.py

Results go to ``<work>/<results>`` (default results.json) after every method, so a partial run keeps what it measured.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

HOME = Path(os.environ.get("VOCADAPT_HOME", Path.home() / ".cache" / "vocadapt"))
MODEL = HOME / "models" / "smollm2-135m"
CORPORA = HOME / "corpora"
METHODS = ["random", "multivariate", "random_token", "fvt", "merge", "align", "clp", "focus", "sava", "salt"]


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


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/vocadapt-init-quality"))
    parser.add_argument("--methods", nargs="*", default=METHODS)
    parser.add_argument("--vocab-size", type=int, default=16_384)
    parser.add_argument("--documents", type=int, default=16, help="Held-out documents per language (the first of the demo's 32).")
    parser.add_argument("--max-length", type=int, default=128, help="Scoring window in tokens (the demo's).")
    parser.add_argument("--lapt-steps", type=int, default=6, help="LAPT optimizer steps (the demo's); 0 skips LAPT.")
    parser.add_argument("--lapt-batch", type=int, default=4, help="Packed sequences per step.")
    parser.add_argument("--lapt-length", type=int, default=64, help="Tokens per packed sequence.")
    parser.add_argument("--lapt-lr", type=float, default=3e-4, help="Peak learning rate (the demo's).")
    parser.add_argument("--helper", default="fasttext", help="Helper for clp, focus, sava, salt (the demo's).")
    parser.add_argument("--no-reference-lapt", action="store_true", help="Skip LAPT of the unadapted source.")
    parser.add_argument("--phases", nargs="*", default=["zero-shot", "lapt"], choices=["zero-shot", "lapt"],
                        help="Run both (default), or one, e.g. to run the phases side by side in two processes.")
    parser.add_argument("--results", default="results.json", help="File name of the results under --work.")
    parser.add_argument("--threads", type=int, default=2)
    return parser.parse_args()


def _target_tokenizer(arguments, source_tokenizer, corpus: list[str]):
    """The demo's adapted tokenizer (trained once and kept under ``work``) and its replacement record."""
    from transformers import AutoTokenizer

    from vocadapt.components.tokenizers.language_settings import tokenizer_settings_for
    from vocadapt.components.tokenizers.replace import replace_vocabulary
    from vocadapt.components.tokenizers.train import train_tokenizer

    trained_dir = arguments.work / f"target-{arguments.vocab_size}"
    if not (trained_dir / "tokenizer.json").exists():
        train_tokenizer(corpus, vocab_size=arguments.vocab_size, out_dir=trained_dir, min_frequency=2, seed=0,
                        like=source_tokenizer, show_progress=False, **tokenizer_settings_for("it", "bytelevel-bpe"))
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


def main() -> None:
    import torch
    from rich.console import Console
    from rich.table import Table
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vocadapt.components.initializers import get_initializer
    from vocadapt.components.metrics.bits_per_byte import bits_per_byte
    from vocadapt.components.surgery import adapt_embeddings
    from vocadapt.components.training import LaptData, LaptSettings, train_lapt

    arguments = _arguments()
    arguments.work.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(arguments.threads)
    console = Console()
    corpus = [str(CORPORA / "it" / "train.txt")]
    source_tokenizer = AutoTokenizer.from_pretrained(str(MODEL))
    source_model = AutoModelForCausalLM.from_pretrained(str(MODEL), dtype=torch.float32).eval()
    started = time.perf_counter()
    replacement = _target_tokenizer(arguments, source_tokenizer, corpus)
    target_tokenizer = replacement.tokenizer
    console.print(f"target tokenizer: {len(target_tokenizer)} ids, {len(replacement.target_to_source)} copied, "
                  f"{len(replacement.new_token_ids)} to initialise ({time.perf_counter() - started:.0f} s)")
    documents = {language: _documents(language, arguments.documents) for language in ("it", "en")}
    helper = None  # built when the first method that needs one comes up
    lapt_data = LaptData.from_files(target=corpus, source=[str(CORPORA / "en" / "train.txt")])
    lapt_settings = LaptSettings(
        max_steps=arguments.lapt_steps or 1, batch_size=arguments.lapt_batch, sequence_length=arguments.lapt_length,
        learning_rate=arguments.lapt_lr, warmup_steps=2, mixing={"target": 0.75, "source": 0.25}, seed=0,
        log_every=1,
    )

    def score(model, tokenizer) -> dict[str, float]:
        return {
            language: round(bits_per_byte(model, tokenizer, texts, max_length=arguments.max_length, batch_size=8), 4)
            for language, texts in documents.items()
        }

    def adapted(method: str):
        return adapt_embeddings(
            copy.deepcopy(source_model), source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer,
            target_to_source=replacement.target_to_source, new_target_ids=replacement.new_token_ids, method=method,
            helper=helper if get_initializer(method).needs_helper else None, corpus_files=corpus, seed=0,
        )

    def helper_for(method: str):
        nonlocal helper
        if get_initializer(method).needs_helper and helper is None:
            started = time.perf_counter()
            with console.status(f"helper {arguments.helper}"):
                helper = _helper(arguments, target_tokenizer, corpus)
            console.print(f"helper: {helper.record()} ({time.perf_counter() - started:.0f} s)")

    rows = {"source": {"method": "source (no adaptation)"}, **{method: {"method": method} for method in arguments.methods}}
    embeddings = {}
    # Phase 1, zero-shot: every method, cheap, so the table's first half exists even if LAPT is cut short
    if "zero-shot" in arguments.phases:
        rows["source"]["zero_shot"] = score(source_model, source_tokenizer)
        console.print(rows["source"])
        for method in arguments.methods:
            helper_for(method)
            started = time.perf_counter()
            model = adapted(method)
            rows[method]["init_seconds"] = round(time.perf_counter() - started, 1)
            rows[method]["zero_shot"] = score(model, target_tokenizer)
            embeddings[method] = model.get_input_embeddings().weight.detach().clone()
            del model
            _save(arguments, lapt_settings, replacement, helper, rows)
            console.print(rows[method])
    # Phase 2, the same short LAPT for every method (same tokenizer, so the same batches in the same order); the
    # initialisation is redone (deterministic: checked byte for byte) instead of keeping ten models in memory
    if "lapt" in arguments.phases and arguments.lapt_steps:
        for method in [*arguments.methods, *([] if arguments.no_reference_lapt else ["source"])]:
            if method == "source":
                model, tokenizer = copy.deepcopy(source_model), source_tokenizer
            else:
                helper_for(method)
                model, tokenizer = adapted(method), target_tokenizer
                if method in embeddings and not torch.equal(model.get_input_embeddings().weight, embeddings[method]):
                    raise RuntimeError(f"{method}: a second initialisation gave different rows (not deterministic)")
            started = time.perf_counter()
            result = train_lapt(model, tokenizer, lapt_data, lapt_settings)
            rows[method]["lapt_seconds"] = round(time.perf_counter() - started, 1)
            rows[method]["lapt_loss"] = [round(loss, 4) for _, loss in result.series("loss")]
            rows[method]["after_lapt"] = score(result.model, tokenizer)
            del model, result
            _save(arguments, lapt_settings, replacement, helper, rows)
            console.print(rows[method])
    console.print(_table(list(rows.values()), Table))


def _table(rows: list[dict], table_class):
    table = table_class("method", "it zero-shot", "en zero-shot", "it after LAPT", "en after LAPT",
                        title="held-out bits per byte (lower is better)")
    for row in rows:
        after = row.get("after_lapt", {})
        before = row.get("zero_shot", {})
        table.add_row(row["method"], *(f"{before[lang]:.3f}" if lang in before else "-" for lang in ("it", "en")),
                      *(f"{after[lang]:.3f}" if lang in after else "-" for lang in ("it", "en")))
    return table


def _save(arguments, lapt_settings, replacement, helper, rows: dict[str, dict]) -> None:
    record = {
        "arguments": {key: str(value) if isinstance(value, Path) else value for key, value in vars(arguments).items()},
        "lapt": lapt_settings.model_dump(),
        "tokenizer": {"ids": len(replacement.tokenizer), "copied": len(replacement.target_to_source),
                      "initialised": len(replacement.new_token_ids)},
        "helper": helper.record() if helper is not None else None,
        "rows": list(rows.values()),
    }
    (arguments.work / arguments.results).write_text(json.dumps(record, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
