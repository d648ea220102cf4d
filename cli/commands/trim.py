"""``vocadapt trim``: cut a model's vocabulary to the tokens some languages' text uses (no training)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from vocadapt.cli.errors import user_errors


def register(app: typer.Typer) -> None:
    @app.command("trim")
    def trim_command(
        model: str = typer.Argument(..., help="Model folder (safetensors, with its tokenizer), a cached hub id, or "
                                    "embedded:smollm2-135m."),
        out: Path = typer.Option(..., "--out", help="Folder to write the trimmed checkpoint to (must not exist)."),
        language: list[str] = typer.Option([], "--language", help="Keep the tokens this language's embedded corpus "
                                           "uses (repeatable; `vocadapt assets --lang CODE` builds more)."),
        corpus: list[Path] = typer.Option([], "--corpus", help="Also keep the tokens this text file uses (repeatable)."),
        min_count: Optional[int] = typer.Option(None, "--min-count", help="Keep tokens seen at least this often "
                                                "(default 1)."),
        size: Optional[int] = typer.Option(None, "--size", help="Keep the most frequent tokens, up to this many in "
                                           "all (instead of --min-count)."),
        overwrite: bool = typer.Option(False, "--overwrite", help="Replace --out if it exists, once the new one is "
                                       "complete."),
        as_json: bool = typer.Option(False, "--json", help="Print the whole record as JSON."),
    ) -> None:
        """Trim MODEL's tokenizer, embeddings and LM head to the tokens the languages' text uses; specials, bytes
        and the pieces of every kept token stay, every kept row is copied, and kept text tokenizes as before."""
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from vocadapt.pipelines.trim import KeepRule, run_trim

        with user_errors(ValueError, FileNotFoundError):
            record = run_trim(model, out, languages=language, corpus_files=corpus,
                              keep=KeepRule(min_count=min_count, size=size), overwrite=overwrite)
        if as_json:
            typer.echo(json.dumps(record, indent=2, sort_keys=True))
            return
        trim, parameters = record["trim"], record["parameters"]
        typer.echo(f"vocabulary: {trim['source_vocab_size']:,} -> {trim['vocab_size']:,} tokens "
                   f"(kept: {trim['kept_by']}; {100 * (trim['corpus_token_share_kept'] or 0):.2f}% of the corpus "
                   "tokens)")
        for label in ("before", "after"):
            count = parameters[label]
            head = "tied" if count["tied"] else f"{count['lm_head'] / 1e6:,.1f}M"
            typer.echo(f"{label}: total {count['total'] / 1e6:,.1f}M parameters (embeddings "
                       f"{count['embeddings'] / 1e6:,.1f}M, head {head})")
        typer.echo(f"change: {parameters['change'] / 1e6:+,.1f}M parameters ({parameters['change_percent']:+.2f}%)")
        typer.echo(f"written: {out}")
