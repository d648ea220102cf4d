"""The fertility matrix of the model families: tokens per word of every family on every offline language, before and
after adaptation to Italian, beside the published figures.

Rows: every family tokenizer of ``platform/families/families.yaml`` (``vocadapt assets --family all``) plus the
embedded SmolLM2-135M. Variants of each: ``source`` (as released); ``replace`` (a target tokenizer of
``--target-size`` tokens trained on the Italian training split ``like`` the family, of the family's
``tokenizer_kind``: byte-level BPE for Llama-3.1, Qwen3, DeepSeek-V3 and SmolLM2, sentencepiece BPE for Llama-2,
Mistral-7B-v0.1 and Gemma-3); ``expand+K`` (``expand_with_top_k`` with that target tokenizer as the Italian
auxiliary, k from ``--expand-sizes``, English protected as `vocadapt tokenizer expand` protects it by default: the
English word list ``lexicons/en.txt`` that `vocadapt assets` builds, and the source's digit/space splits kept).

Columns: every language of ``--languages`` whose embedded corpus is built, on its held-out ``test`` split (help pages
and Bible paragraphs, the domain the target tokenizer was trained on) and, for Italian and English, on Debian's
fortune cookies (``platform/assets/out_of_domain.py``), text no vocadapt corpus trains on.

Fertility is ``language_fertility_report``'s (``components/tokenizers/language_fertility.py``): tokens per
whitespace-separated word, special tokens not counted, SAVA Table 2's definition (Rust et al. 2021). Tokens per
paragraph ("Design choices" §4.4: tokens per text) and per byte are recorded too; the reduction after adaptation is
``1 - tokens_after / tokens_before`` on the same text, the same under every definition.

    python benchmarks/family_fertility.py [--languages it en de] [--families llama3_1 smollm2]
        [--expand-sizes 1000 5000 10000] [--target-size 32000] [--no-out-of-domain] [--quick] [--out DIR]
    python benchmarks/family_fertility.py --markdown benchmarks/results/family-fertility/matrix.json

``--quick``: 100 paragraphs per text, target tokenizers of 2,000 tokens trained on 3,000 lines, k = 50 and 200
unless given, the first 5,000 words of the English word list protected (the tests run it on two families). The
JSON (``DIR/matrix.json``) is rewritten after every family, so a cut-off run still reports; ``--markdown`` prints a
written one as BENCHMARKS.md's tables. The full matrix took 34 minutes and 2.96 GiB on 2 shared cores.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

RESULTS = Path(__file__).resolve().parent / "results" / "family-fertility"
EMBEDDED = "smollm2"
MEASURES = ("tokens_per_word", "tokens_per_paragraph", "tokens_per_byte")

# Published figures, with where they come from; "tokens_per_word" as SAVA defines fertility (whitespace words).
PUBLISHED: list[dict[str, Any]] = [
    *({"source": "SAVA Table 2", "family": family, "model": model, "language": lang, "text": text,
       "measure": "tokens_per_word", "value": value}
      for family, model, figures in (
          ("mistral_v1", "Mistral-7B-v0.1", {("it", "CulturaX"): 1.88, ("en", "CulturaX"): 1.32,
                                             ("it", "Wikipedia"): 2.05, ("en", "Wikipedia"): 1.57}),
          ("llama3_1", "Llama-3-8B", {("it", "CulturaX"): 1.67, ("en", "CulturaX"): 1.15,
                                      ("it", "Wikipedia"): 1.80, ("en", "Wikipedia"): 1.31}),
          ("minerva", "Minerva (the Italian target tokenizer, 32,768)",
           {("it", "CulturaX"): 1.39, ("en", "CulturaX"): 1.32, ("it", "Wikipedia"): 1.66,
            ("en", "Wikipedia"): 1.59}))
      for (lang, text), value in figures.items()),
    {"source": "SAVA §4.1 (abstract: 'reducing token fertility by 25%')", "family": "mistral_v1",
     "model": "Mistral-7B-v0.1 -> Minerva tokenizer", "language": "it", "text": "CulturaX + Wikipedia",
     "measure": "reduction_after_replace", "value": 0.25},
    {"source": "SAVA §4.1 ('improves its fertility up to 16%')", "family": "llama3_1",
     "model": "Llama-3.1-8B -> Minerva tokenizer", "language": "it", "text": "CulturaX + Wikipedia",
     "measure": "reduction_after_replace", "value": 0.16},
    {"source": "Design choices §5.1 / Figure 2b ('adding ~1K language-specific tokens doubles the fertility on "
               "average'; the curve's points are only in the figure)", "family": "llama2",
     "model": "LLaMA-2-7B + ΔV≈1K (sentencepiece BPE on mC4)", "language": "hi ar tr ta (average)",
     "text": "FLORES", "measure": "reduction_after_expand_1k", "value": 0.5},
]  # fmt: skip


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    from vocadapt.platform.families.catalogue import family_names

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--languages", nargs="+", default=["it", "en", "de", "fr", "es"],
                        help="languages to measure on (those whose embedded corpus is not built are skipped, said)")
    parser.add_argument("--families", nargs="+", default=[*family_names(), EMBEDDED],
                        help=f"families of families.yaml, and {EMBEDDED} for the embedded model")
    parser.add_argument("--expand-sizes", nargs="+", type=int, default=None,
                        help="k of expand_with_top_k (default 1000 5000 10000; --quick: 50 200)")
    parser.add_argument("--target-size", type=int, default=None, help="target tokenizer size (default 32000; "
                        "--quick: 2000)")
    parser.add_argument("--no-out-of-domain", action="store_true", help="held-out splits only (the fortunes are "
                        "downloaded once from Debian; it and en only)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes and 100 paragraphs per text (tests)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"folder for matrix.json (default {RESULTS})")
    parser.add_argument("--markdown", type=Path, default=None, metavar="JSON",
                        help="measure nothing: print a written matrix.json as BENCHMARKS.md's tables")
    arguments = parser.parse_args(argv)
    arguments.expand_sizes = arguments.expand_sizes or ([50, 200] if arguments.quick else [1000, 5000, 10000])
    arguments.target_size = arguments.target_size or (2000 if arguments.quick else 32000)
    return arguments


def load_texts(languages: list[str], limit: int | None, out_of_domain: bool = True,
               ) -> tuple[dict[str, list[str]], dict[str, dict], list[str]]:
    """``"<lang>/held-out"`` and ``"<lang>/out-of-domain"`` -> paragraphs; their descriptions; what was skipped."""
    from vocadapt.components.errors import UserError
    from vocadapt.platform.assets.embedded import vocadapt_home
    from vocadapt.platform.assets.out_of_domain import out_of_domain_documents

    texts, described, skipped = {}, {}, []
    for lang in languages:
        held_out = vocadapt_home() / "corpora" / lang / "test.txt"
        if not held_out.is_file():
            skipped.append(f"{lang}: no embedded corpus (run `vocadapt assets --lang {lang}`)")
            continue
        lines = [line for line in held_out.read_text(encoding="utf-8").splitlines() if line.strip()]
        texts[f"{lang}/held-out"] = lines[:limit]
        described[f"{lang}/held-out"] = {"file": f"corpora/{lang}/test.txt", "kind": "held-out test split of the "
                                         "embedded corpus (LibreOffice help pages and Bible paragraphs)"}
        if not out_of_domain:
            continue
        try:
            cookies = out_of_domain_documents(lang, limit=limit or 100_000)
        except UserError as error:
            skipped.append(f"{lang}/out-of-domain: {error}")
            continue
        texts[f"{lang}/out-of-domain"] = cookies
        described[f"{lang}/out-of-domain"] = {"file": f"out-of-domain/{lang}.txt", "kind": "Debian fortune cookies "
                                              "of at least 8 words, never in any training corpus"}
    return texts, described, skipped


def source_tokenizer(name: str) -> tuple[Any, str, str]:
    """The family's tokenizer as released, its display name and the kind of target tokenizer trained like it."""
    from transformers import AutoTokenizer

    if name == EMBEDDED:
        from vocadapt.platform.assets.embedded import load_assets

        return AutoTokenizer.from_pretrained(str(load_assets(languages=()).model_dir)), "SmolLM2-135M", "bytelevel-bpe"
    from vocadapt.platform.families.assets import family_tokenizer_dir
    from vocadapt.platform.families.catalogue import model_family

    family = model_family(name)
    return AutoTokenizer.from_pretrained(str(family_tokenizer_dir(name))), family.display, family.tokenizer_kind


def measure(tokenizer: Any, texts: dict[str, list[str]], new_token_ids: list[int] | None = None) -> dict[str, dict]:
    """Every text's fertility figures (``language_fertility_report``) for one tokenizer."""
    from vocadapt.components.tokenizers.language_fertility import LanguageDocuments, language_fertility_report

    figures = {}
    for key, documents in texts.items():
        report = language_fertility_report(tokenizer, LanguageDocuments(documents, key.split("/")[0]),
                                           new_token_ids=new_token_ids)
        figures[key] = {"tokens": report.tokens, "words": report.words, "documents": report.documents,
                        "bytes": report.bytes, "tokens_per_word": report.tokens_per_word,
                        "tokens_per_paragraph": report.tokens_per_paragraph,
                        "tokens_per_byte": report.tokens_per_byte, "new_token_share": report.new_token_share,
                        "segmentation": report.segmentation}  # fmt: skip
    return figures


@dataclass(frozen=True)
class TrainingText:
    """What every family's variants are built from: the Italian training lines (expansion's top-k is counted on
    them), their file (the replacement tokenizer is trained on it) and the English words whose tokenization an
    expansion must keep (none: nothing protected)."""

    italian_train: list[str]
    train_file: Path
    guard_words: list[str]


def family_variants(name: str, texts: dict[str, list[str]], training: TrainingText, arguments: argparse.Namespace,
                    workdir: Path) -> dict[str, Any]:
    """One family: the source, the replaced and the expanded tokenizers, each measured on every text."""
    from vocadapt.components.tokenizers.expand import expand_with_top_k, protected_source_text, unreachable_tokens
    from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, train_tokenizer

    italian_train, train_file, guard_words = training.italian_train, training.train_file, training.guard_words
    source, display, kind = source_tokenizer(name)
    entry: dict[str, Any] = {"display": display, "kind": kind, "variants": {}}
    entry["variants"]["source"] = {"vocab_size": len(source), "measures": measure(source, texts)}
    started = time.perf_counter()
    spec = TokenizerTrainingSpec(kind, arguments.target_size, max_lines=3000 if arguments.quick else None, like=source)
    target = train_tokenizer([train_file], spec, workdir / name, show_progress=False)
    entry["variants"]["replace"] = {"vocab_size": len(target), "seconds": time.perf_counter() - started,
                                    "measures": measure(target, texts)}
    _print_variant(name, "replace", entry["variants"]["replace"])
    started = time.perf_counter()
    guard = protected_source_text(source, [], guard_words) if guard_words else None
    entry["guard_seconds"] = time.perf_counter() - started
    for k in arguments.expand_sizes:
        started = time.perf_counter()
        expansion = expand_with_top_k(source, target, italian_train, k, protect=guard)
        seconds = time.perf_counter() - started
        entry["variants"][f"expand+{k}"] = {
            "vocab_size": len(expansion.tokenizer), "seconds": seconds, "new_tokens": len(expansion.new_token_ids),
            "intermediate_tokens": len(expansion.intermediate_token_ids), "skipped": expansion.skipped,
            "unreachable": len(unreachable_tokens(expansion.tokenizer, expansion.new_token_ids)),
            "measures": measure(expansion.tokenizer, texts, expansion.new_token_ids),
        }  # fmt: skip
        _print_variant(name, f"expand+{k}", entry["variants"][f"expand+{k}"])
        del expansion
        gc.collect()
    return entry


def _print_variant(name: str, variant: str, figures: dict[str, Any]) -> None:
    seconds = f"{figures['seconds']:.1f} s" if "seconds" in figures else ""
    extra = f", {figures['new_tokens']:,} new" if "new_tokens" in figures else ""
    print(f"  {name} {variant}: {figures['vocab_size']:,} tokens{extra}, built in {seconds}", flush=True)


def matrix_rows(families: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per family, variant and text, with the reduction against the family's source tokenizer."""
    rows = []
    for name, entry in families.items():
        before = entry["variants"]["source"]["measures"]
        for variant, figures in entry["variants"].items():
            for key, values in figures["measures"].items():
                language, text = key.split("/")
                rows.append({"family": name, "display": entry["display"], "variant": variant,
                             "vocab_size": figures["vocab_size"], "language": language, "text": text,
                             **{m: values[m] for m in MEASURES}, "new_token_share": values["new_token_share"],
                             "reduction": 1 - values["tokens"] / before[key]["tokens"]})  # fmt: skip
    return rows


def print_matrix(rows: list[dict[str, Any]]) -> None:
    """Tokens per word: a row per family and variant, a column per text (reduction in brackets after adaptation)."""
    keys = list(dict.fromkeys(f"{row['language']}/{row['text']}" for row in rows))
    print(f"\n{'tokens per word':<26}" + "".join(f"{key:>22}" for key in keys))
    table: dict[tuple[str, str], dict[str, str]] = {}
    for row in rows:
        cell = f"{row['tokens_per_word']:.3f}"
        if row["variant"] != "source":
            cell += f" ({-100 * row['reduction']:+.1f}%)"
        table.setdefault((row["family"], row["variant"]), {})[f"{row['language']}/{row['text']}"] = cell
    for (family, variant), cells in table.items():
        print(f"{family + ' ' + variant:<26}" + "".join(f"{cells.get(key, ''):>22}" for key in keys))


def markdown_tables(result: dict[str, Any]) -> str:
    """Tokens per word (reduction against the source after adaptation) and the build times, as Markdown."""
    keys = list(result["texts"])
    lines = ["| family | variant | vocabulary | " + " | ".join(keys) + " |", "| --- " * (3 + len(keys)) + "|"]
    cells = {(row["family"], row["variant"], f"{row['language']}/{row['text']}"): row for row in result["rows"]}
    for name, entry in result["families"].items():
        for variant, figures in entry["variants"].items():
            values = []
            for key in keys:
                row = cells[(name, variant, key)]
                value = f"{row['tokens_per_word']:.3f}"
                values.append(value if variant == "source" else f"{value} ({-100 * row['reduction']:+.1f}%)")
            lines.append(f"| {entry['display']} | {variant} | {figures['vocab_size']:,} | " + " | ".join(values) + " |")
    lines += ["", "| family | guard (s) | replace: train (s) | " + " | ".join(
        f"{variant}: s (new, intermediates, skipped to protect English)"
        for variant in next(iter(result["families"].values()))["variants"] if variant.startswith("expand")) + " |"]
    lines.append("| --- " * (lines[-1].count("|") - 1) + "|")
    for entry in result["families"].values():
        expanded = [f"{f['seconds']:.0f} ({f['new_tokens']:,}, {f['intermediate_tokens']:,}, "
                    f"{f['skipped'].get('would change protected source-language text', 0):,})"
                    for variant, f in entry["variants"].items() if variant.startswith("expand")]  # fmt: skip
        lines.append(f"| {entry['display']} | {entry['guard_seconds']:.0f} | "
                     f"{entry['variants']['replace']['seconds']:.0f} | " + " | ".join(expanded) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    import resource

    from vocadapt.platform.assets.embedded import load_assets

    arguments = parse_arguments(argv)
    if arguments.markdown is not None:
        result = json.loads(arguments.markdown.read_text(encoding="utf-8"))
        print(markdown_tables(result))
        return result
    started = time.perf_counter()
    assets = load_assets(languages=("it",))
    limit = 100 if arguments.quick else None
    texts, described, skipped = load_texts(arguments.languages, limit, not arguments.no_out_of_domain)
    for line in skipped:
        print(f"skipped {line}")
    train_file = assets.corpus("it", "train")
    italian_train = [line for line in train_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    italian_train = italian_train[:3000] if arguments.quick else italian_train
    lexicon = assets.lexicon("en")
    guard_words = lexicon.read_text(encoding="utf-8").split() if lexicon is not None else []
    guard_words = guard_words[:5000] if arguments.quick else guard_words
    result: dict[str, Any] = {
        "command": "python benchmarks/family_fertility.py " + shlex.join(argv if argv is not None else sys.argv[1:]),
        "definition": "tokens per whitespace-separated word (language_fertility_report: Segmentation's "
                      "'whitespace-separated words' for Latin-script languages), special tokens not counted; "
                      "SAVA Table 2's definition. tokens_per_paragraph is 'Design choices' §4.4's (tokens per text); "
                      "reduction = 1 - tokens after / tokens before on the same text",
        "settings": {"target_size": arguments.target_size, "expand_sizes": arguments.expand_sizes,
                     "quick": arguments.quick, "target_training": f"corpora/it/train.txt "
                     f"({len(italian_train):,} lines)", "top_k_counted_on": "corpora/it/train.txt",
                     "protected": f"English word list lexicons/en.txt ({len(guard_words):,} words)" if guard_words
                     else "nothing (no English word list built)", "keep_source_splits": True},
        "texts": {key: {**described[key], "documents": len(documents)} for key, documents in texts.items()},
        "skipped": skipped, "published": PUBLISHED, "families": {}, "rows": [],
    }  # fmt: skip
    arguments.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="family-fertility-") as workdir:
        for name in arguments.families:
            print(f"{name}:", flush=True)
            result["families"][name] = family_variants(
                name, texts, TrainingText(italian_train, train_file, guard_words), arguments, Path(workdir))
            result["rows"] = matrix_rows(result["families"])
            result["wall_seconds"] = time.perf_counter() - started
            result["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            _write(arguments.out / "matrix.json", result)
            gc.collect()
    print_matrix(result["rows"])
    print(f"\nwall {result['wall_seconds']:.0f} s, peak RSS {result['max_rss_mb']:.0f} MB; "
          f"JSON: {arguments.out / 'matrix.json'}")
    return result


def _write(path: Path, result: dict[str, Any]) -> None:
    staging = path.with_suffix(".tmp")
    staging.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(staging, path)


if __name__ == "__main__":
    main()
