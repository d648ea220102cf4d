"""``vocadapt params``: parameter counts of a model before and after a vocabulary change (SAVA Table 1)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from vocadapt.cli.errors import user_errors


def register(app: typer.Typer) -> None:
    @app.command("params")
    def params_command(
        config: Path = typer.Option(..., "--config", help="A model's config.json (or its folder)."),
        vocab_size: int = typer.Option(..., "--vocab-size", help="Vocabulary size after the change."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        """Count parameters (exactly, on the meta device) before and after changing the vocabulary size."""
        from vocadapt.components.tokenizers.params import load_model_config, vocabulary_change

        with user_errors(FileNotFoundError, ValueError):
            if vocab_size <= 0:
                raise ValueError(f"--vocab-size must be positive, got {vocab_size}")
            change = vocabulary_change(load_model_config(config), vocab_size)
        if as_json:
            typer.echo(json.dumps(change, indent=2))
            return
        before, after = change["before"], change["after"]
        for label, count in (("before", before), ("after", after)):
            head = "tied" if count["tied"] else f"head {count['lm_head'] / 1e6:,.1f}M"
            typer.echo(f"{label}: vocabulary {count['vocab_size']:,}  total {count['total'] / 1e9:.2f}B  "
                       f"(embeddings {count['embeddings'] / 1e6:,.1f}M, {head}, body {count['body'] / 1e9:.2f}B)")
        typer.echo(f"change: {change['change'] / 1e6:+,.1f}M parameters ({change['change_percent']:+.2f}%)")
