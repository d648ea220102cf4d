"""One expansion budget for several languages: per-language fertility of SmolLM2's tokenizer expanded four ways.

For the target languages (default it de ru: two Latin-script languages and one Cyrillic) on the embedded corpora:

(a) the source tokenizer (SmolLM2-135M's, 49,152 tokens);
(b) for each language, a one-language expansion with the whole budget k ("0.01GB" §3: the k most frequent new
    tokens of a tokenizer trained on that language), as ``vocadapt adapt`` does for ``target.language``;
(c) the multilingual expansion with the same total k, candidates of every language ordered by the ``gain`` rule
    (components/tokenizers/budget.py: tokens saved per word of each language's corpus, per id the token takes
    with its intermediates), and by the ``saving`` rule (the same saving, every token counted as one id);
(d) the same with the ``even`` rule (languages take turns, k/n each).

Each language's auxiliary tokenizer is trained on its first ``--training-lines`` training lines (kind by script,
``tokenizer_settings_for``, ``--vocab-size``); candidates are ranked on its first ``--ranking-lines`` lines.
Every expansion protects English as ``vocadapt adapt`` does: ``--protect-lines`` English training lines and the
embedded English word list (every casing, alone and after a space). Fertility is tokens per word (whitespace words)
on the held-out target side of the parallel validation pairs (``--documents``), which no tokenizer trained or
ranked on. English: the English validation split's first ``--documents`` paragraphs, tokenized by every expanded
tokenizer and compared id for id with the source's (the protection claims identical ids).

    .venv/bin/python benchmarks/multilingual_budget.py [--languages it de ru] [--k 3000] [--vocab-size 8192]
        [--training-lines 20000] [--ranking-lines 5000] [--protect-lines 20000] [--documents 500] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _lines(path: Path, count: int) -> list[str]:
    lines = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                lines.append(line.rstrip("\n"))
                if len(lines) >= count:
                    break
    return lines


def _fertility(tokenizer, documents: list[str]) -> float:
    """Tokens per whitespace word, special tokens not counted."""
    ids = tokenizer(documents, add_special_tokens=False)["input_ids"]
    return sum(map(len, ids)) / sum(len(document.split()) for document in documents)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--languages", nargs="+", default=["it", "de", "ru"])
    parser.add_argument("--k", type=int, default=3000, help="total new tokens of every expansion")
    parser.add_argument("--vocab-size", type=int, default=8192)
    parser.add_argument("--training-lines", type=int, default=20000)
    parser.add_argument("--ranking-lines", type=int, default=5000)
    parser.add_argument("--protect-lines", type=int, default=20000)
    parser.add_argument("--documents", type=int, default=500)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    from transformers import AutoTokenizer

    from vocadapt.components.tokenizers.budget import language_candidates
    from vocadapt.components.tokenizers.expand import expand_vocabulary, protected_source_text
    from vocadapt.components.tokenizers.language_settings import tokenizer_settings_for
    from vocadapt.components.tokenizers.multilingual import expand_for_languages
    from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, train_tokenizer
    from vocadapt.pipelines.languages import read_pairs
    from vocadapt.platform.assets.embedded import load_assets

    assets = load_assets(languages=args.languages)
    source = AutoTokenizer.from_pretrained(str(assets.model_dir))
    started = time.perf_counter()
    english_train = _lines(assets.corpus("en", "train"), args.protect_lines)
    lexicon = assets.lexicon("en")
    words = lexicon.read_text(encoding="utf-8").split() if lexicon else None
    guard = protected_source_text(source, english_train, words)
    print(f"guard: {args.protect_lines} English lines + {len(words or []):,} lexicon words "
          f"({time.perf_counter() - started:.0f} s)", flush=True)

    held_out = {language: [target for target, _ in read_pairs(assets.parallel(language, "validation"), language)]
                [: args.documents] for language in args.languages}  # fmt: skip
    english = _lines(assets.corpus("en", "validation"), args.documents)
    english_ids = source(english, add_special_tokens=False)["input_ids"]

    auxiliary, candidates = {}, []
    with tempfile.TemporaryDirectory() as scratch:
        for language in args.languages:
            started = time.perf_counter()
            spec = TokenizerTrainingSpec(vocab_size=args.vocab_size, max_lines=args.training_lines, like=source,
                                         **tokenizer_settings_for(language))
            auxiliary[language] = train_tokenizer([assets.corpus(language, "train")], spec, Path(scratch) / language,
                                                  show_progress=False)
            ranking = _lines(assets.corpus(language, "train"), args.ranking_lines)
            candidates.append(language_candidates(language, source, auxiliary[language], ranking))
            print(f"{language}: {len(auxiliary[language]):,}-token tokenizer, {len(candidates[-1].candidates):,} "
                  f"candidates on {candidates[-1].words:,} words ({time.perf_counter() - started:.0f} s)",
                  flush=True)

        tokenizers = {"source": source}
        added: dict[str, dict[str, int]] = {}
        for entry in candidates:
            started = time.perf_counter()
            expansion = expand_vocabulary(source, [c.token for c in entry.candidates], max_new_tokens=args.k,
                                          protect=guard)
            tokenizers[f"only-{entry.language}"] = expansion.tokenizer
            added[f"only-{entry.language}"] = {entry.language: len(expansion.new_token_ids)}
            print(f"only-{entry.language}: {len(expansion.new_token_ids):,} ids ({time.perf_counter() - started:.0f} s)",
                  flush=True)
        plans = {}
        for rule in ("gain", "saving", "even"):
            started = time.perf_counter()
            expansion = expand_for_languages(source, candidates, args.k, rule=rule, protect=guard)
            tokenizers[f"multi-{rule}"] = expansion.tokenizer
            added[f"multi-{rule}"] = expansion.added
            plans[rule] = {"planned": expansion.planned, "added": expansion.added,
                           "intermediates": len(expansion.intermediate_token_ids),
                           "new_ids": len(expansion.new_token_ids), "skipped": expansion.skipped}
            print(f"multi-{rule}: {len(expansion.new_token_ids):,} ids, planned {expansion.planned}, added "
                  f"{expansion.added} ({time.perf_counter() - started:.0f} s)", flush=True)

    table = {name: {language: _fertility(tokenizer, held_out[language]) for language in args.languages}
             for name, tokenizer in tokenizers.items()}  # fmt: skip
    for name, tokenizer in tokenizers.items():
        table[name]["en"] = _fertility(tokenizer, english)
        table[name]["en_identical"] = tokenizer(english, add_special_tokens=False)["input_ids"] == english_ids
    header = ["tokenizer", *args.languages, "mean", "en", "en ids identical", "new ids per language"]
    print("\n| " + " | ".join(header) + " |\n|" + " --- |" * len(header))
    for name, row in table.items():
        mean = sum(row[language] for language in args.languages) / len(args.languages)
        print(f"| {name} | " + " | ".join(f"{row[language]:.3f}" for language in args.languages)
              + f" | {mean:.3f} | {row['en']:.3f} | {'yes' if row['en_identical'] else 'NO'} | "
              f"{added.get(name, {})} |")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    if args.json:
        args.json.write_text(json.dumps({"commit": commit, "args": {k: str(v) for k, v in vars(args).items()},
                                         "fertility": table, "added": added, "plans": plans}, indent=2))
    for name, tokenizer in tokenizers.items():  # which English paragraphs changed, if any
        changed = [i for i, ids in enumerate(tokenizer(english, add_special_tokens=False)["input_ids"])
                   if ids != english_ids[i]]
        for index in changed[:3]:
            pieces = tokenizer.convert_ids_to_tokens(tokenizer(english[index], add_special_tokens=False)["input_ids"])
            new = [piece for piece in pieces if tokenizer.convert_tokens_to_ids(piece) >= len(source)]
            print(f"{name}: English paragraph {index} changed, new tokens {new}")
    return 0 if all(row["en_identical"] for row in table.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
