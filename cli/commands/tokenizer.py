"""``vocadapt tokenizer train|overlap|expand``: train a target tokenizer, compare two, expand one.

A tokenizer argument is a folder ``AutoTokenizer`` loads, a ``.gguf`` file, or ``embedded`` (the embedded default's
SmolLM2 tokenizer, after ``vocadapt assets``). Everything runs offline.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from vocadapt.cli.errors import user_errors

from vocadapt.components.corpora.lines import read_lines, require_files
from vocadapt.components.errors import UserError

tokenizer_app = typer.Typer(help="Train, compare and expand tokenizers.", no_args_is_help=True)
BAD_INPUT = (FileNotFoundError, FileExistsError, ValueError)


def register(app: typer.Typer) -> None:
    app.add_typer(tokenizer_app, name="tokenizer")


@tokenizer_app.command("train")
def train_command(
    corpus: list[Path] = typer.Option([], "--corpus", help="UTF-8 text file, one document per line (repeatable)."),
    dataset: Optional[Path] = typer.Option(None, "--dataset", help="An HF dataset saved with save_to_disk, or a "
                                           "local .json/.jsonl/.parquet/.csv file, instead of --corpus."),
    text_column: str = typer.Option("text", "--text-column", help="Dataset column holding the text."),
    kind: str = typer.Option(..., "--kind", help="bytelevel-bpe | spm-bpe | spm-unigram | wordpiece"),
    vocab_size: int = typer.Option(..., "--vocab-size", help="Total vocabulary size, special tokens included."),
    out: Path = typer.Option(..., "--out", help="Folder to write (must be new or empty unless --overwrite)."),
    like: Optional[str] = typer.Option(None, "--like", help="Source tokenizer whose special tokens, chat template "
                                       "and bos/eos settings the new one carries (to replace its vocabulary)."),
    min_frequency: int = typer.Option(2, "--min-frequency", help="Minimum pair frequency to merge."),
    max_lines: Optional[int] = typer.Option(None, "--max-lines", help="Train on the first N lines only."),
    seed: int = typer.Option(0, "--seed", min=0, help="sentencepiece's random seed."),
    special_token: list[str] = typer.Option([], "--special-token", help="Extra special token (repeatable)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing non-empty --out."),
) -> None:
    """Train a tokenizer (deterministic, offline) that AutoTokenizer.from_pretrained(OUT) loads."""
    from vocadapt.components.tokenizers import train as training

    with user_errors(*BAD_INPUT):
        from vocadapt.platform.model_loading import load_tokenizer

        from vocadapt.cli.values import at_least

        at_least("--vocab-size", vocab_size, 1, "tokens, special tokens included")  # values first, then files
        at_least("--min-frequency", min_frequency, 1)
        at_least("--max-lines", max_lines, 1)
        if bool(corpus) == (dataset is not None):
            raise UserError("give either --corpus FILE... or --dataset PATH (exactly one of them)")
        require_files(corpus, "--corpus")
        from vocadapt.components.input_files import refuse_output_over_inputs

        refuse_output_over_inputs(out, "--out", [*[("--corpus", path) for path in corpus], ("--dataset", dataset),
                                                 ("--like", like)])
        if kind not in training.KINDS:
            raise UserError(f"--kind {kind!r}: unknown tokenizer kind; choose one of {', '.join(training.KINDS)}")
        if out.exists() and any(out.iterdir()) and not overwrite:
            raise UserError(f"--out {out} exists and is not empty; choose another --out or pass --overwrite")
        spec = training.TokenizerTrainingSpec(
            kind, vocab_size, min_frequency=min_frequency, special_tokens=special_token or None, max_lines=max_lines,
            seed=seed, like=load_tokenizer(like) if like else None,
            require_vocab_size=True)  # fmt: skip  # a smaller vocabulary than asked is refused
        try:
            if dataset is not None:
                trained = training.train_tokenizer_from_dataset(
                    _load_dataset(dataset), spec, out, text_column=text_column, overwrite=overwrite)  # fmt: skip
            else:
                trained = training.train_tokenizer(corpus, spec, out, overwrite=overwrite)
        except training.VocabularyNotReached as error:
            raise UserError(f"--vocab-size {vocab_size}: {error} (--vocab-size {error.reached} or a lower "
                            "--min-frequency)") from error
    typer.echo(f"trained {kind} tokenizer with {len(trained):,} tokens -> {out}")


def _load_dataset(path: Path):
    import datasets

    if not path.exists():
        raise FileNotFoundError(f"dataset {path} not found; pass a save_to_disk folder or a local data file")
    if path.is_dir():
        loaded = datasets.load_from_disk(str(path))
        return loaded["train"] if isinstance(loaded, datasets.DatasetDict) else loaded
    builder = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}.get(path.suffix)
    if builder is None:
        raise ValueError(f"unsupported dataset file {path.name}; use .json, .jsonl, .parquet or .csv")
    return datasets.load_dataset(builder, data_files=str(path), split="train")


@tokenizer_app.command("overlap")
def overlap_command(
    source: str = typer.Option(..., "--source", help="The source model's tokenizer."),
    target: str = typer.Option(..., "--target", help="The target tokenizer."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    with_map: bool = typer.Option(False, "--with-map", help="Include the target->source id map in the JSON."),
) -> None:
    """Shared tokens on canonical form (bytes + word start), with SALT's coverage figures."""
    from vocadapt.components.tokenizers.overlap import token_overlap

    with user_errors(*BAD_INPUT):
        from vocadapt.platform.model_loading import load_tokenizer

        overlap = token_overlap(load_tokenizer(source), load_tokenizer(target))
    if as_json:
        typer.echo(json.dumps(overlap.as_dict(with_map=with_map), indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"overlap: target {target} against source {source}")
    for column in ("target tokens", "copied", "to initialise", "coverage %", "same raw string"):
        table.add_column(column, justify="right")
    row = overlap.coverage_row()
    table.add_row(f"{overlap.target_vocab_size:,}", f"{row['copied']:,}", f"{row['to_initialise']:,}",
                  f"{row['coverage_percent']:.1f}", f"{overlap.shared_by_raw_string:,}")  # fmt: skip
    Console().print(table)


@tokenizer_app.command("expand")
def expand_command(
    source: str = typer.Option(..., "--source", help="The BPE tokenizer to expand (byte-level or sentencepiece)."),
    target: str = typer.Option(..., "--target", help="Target tokenizer: its ΔV is appended; with --top-k, the "
                               "auxiliary tokenizer whose most frequent new tokens on --corpus are added."),
    top_k: Optional[int] = typer.Option(None, "--top-k", help="Add only the K most frequent new tokens."),
    corpus: list[Path] = typer.Option([], "--corpus", help="Target-language text for --top-k (repeatable)."),
    protect: list[Path] = typer.Option([], "--protect", help="Source-language text whose tokenization must not "
                                       "change (repeatable)."),
    protect_lexicon: list[Path] = typer.Option([], "--protect-lexicon", help="Source-language word list, one word "
                                               "per line, each protected in every casing (repeatable; e.g. "
                                               "/usr/share/dict/words); default: the English word list `vocadapt "
                                               "assets` builds (lexicons/en.txt), where it was built."),
    no_protect_lexicon: bool = typer.Option(False, "--no-protect-lexicon", help="Protect no word list (opting out "
                                            "of the default English one)."),
    out: Path = typer.Option(..., "--out", help="Folder for the expanded tokenizer."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Append new tokens as real vocabulary entries with merges (not add_tokens)."""
    from vocadapt.components.tokenizers import expand
    from vocadapt.components.tokenizers.train import save_atomically

    with user_errors(*BAD_INPUT):
        from vocadapt.platform.model_loading import load_tokenizer

        from vocadapt.cli.values import at_least
        from vocadapt.components.input_files import refuse_output_over_inputs

        at_least("--top-k", top_k, 1, "new tokens to add")
        if top_k is not None and not corpus:
            raise UserError("--top-k needs --corpus FILE with target-language text to count tokens on")
        refuse_output_over_inputs(out, "--out", [("--source", source), ("--target", target),
                                                 *[(flag, path) for flag, paths in (("--corpus", corpus),
                                                   ("--protect", protect), ("--protect-lexicon", protect_lexicon))
                                                   for path in paths]])
        if out.exists() and any(out.iterdir()):
            raise UserError(f"--out {out} exists and is not empty; choose a new --out folder")
        source_tokenizer, target_tokenizer = load_tokenizer(source), load_tokenizer(target)
        protected = read_lines(protect, flag="--protect") if protect else None
        if protect_lexicon and no_protect_lexicon:
            raise UserError("--protect-lexicon and --no-protect-lexicon contradict each other; give one")
        if not protect_lexicon and not no_protect_lexicon:  # protected by default; opting out is explicit
            from vocadapt.platform.assets.sources import word_list_path

            embedded = word_list_path("embedded", "en", "--protect-lexicon")
            protect_lexicon = [embedded] if embedded is not None else []  # none built: the summary lists none
        lexicon = ([word for line in read_lines(protect_lexicon, flag="--protect-lexicon") for word in line.split()]
                   if protect_lexicon else None)
        if top_k is None:
            expansion = expand.expand_with_target(source_tokenizer, target_tokenizer, protect=protected,
                                                  protect_words=lexicon)  # fmt: skip
        else:
            expansion = expand.expand_with_top_k(source_tokenizer, target_tokenizer, read_lines(corpus), top_k,
                                                 protect=protected, protect_words=lexicon)  # fmt: skip
        save_atomically(expansion.tokenizer, out)
    summary = {
        "source_vocab_size": expansion.source_vocab_size,
        "expanded_vocab_size": len(expansion.tokenizer),
        "new_tokens": len(expansion.new_token_ids),
        "intermediate_tokens": len(expansion.intermediate_token_ids),
        "skipped": expansion.skipped,
        "unreachable": len(expand.unreachable_tokens(expansion.tokenizer, expansion.new_token_ids)),
        "protected_lexicon": [str(path) for path in protect_lexicon],
        "out": str(out),
    }
    typer.echo(json.dumps(summary, indent=2) if as_json else "\n".join(f"{k}: {v}" for k, v in summary.items()))
