"""``vocadapt fertility``: tokens per word, character, byte and document for one or more tokenizers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from vocadapt.cli.errors import user_errors

from vocadapt.components.errors import UserError

COLUMNS = ("tokens_per_word", "tokens_per_character", "tokens_per_byte", "tokens_per_document", "parity",
           "new_token_share", "byte_fallback_rate")  # fmt: skip


def register(app: typer.Typer) -> None:
    @app.command("fertility")
    def fertility_command(
        tokenizer: list[str] = typer.Option(..., "--tokenizer", help="Tokenizer folder, .gguf file or 'embedded' "
                                            "(repeatable)."),
        corpus: list[Path] = typer.Option(..., "--corpus", help="Text file, one document per line (repeatable)."),
        reference: list[Path] = typer.Option([], "--reference", help="The same documents in English, line-aligned "
                                             "with --corpus, for parity (repeatable)."),
        new_from: Optional[str] = typer.Option(None, "--new-from", help="Source tokenizer: report the share of "
                                               "tokens that are not in it (the new vocabulary)."),
        max_lines: Optional[int] = typer.Option(None, "--max-lines", min=1, help="Use the first N documents only."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    ) -> None:
        """Measure fertility (batch-encoded) of each tokenizer on the same corpus."""
        from vocadapt.components.tokenizers.fertility import ParallelText, fertility_report
        from vocadapt.components.tokenizers.overlap import token_overlap
        from vocadapt.components.corpora.lines import read_lines
        from vocadapt.platform.model_loading import load_tokenizer

        with user_errors(FileNotFoundError, ValueError):
            documents = read_lines(corpus, max_lines)
            references = read_lines(reference, max_lines, flag="--reference") if reference else None
            if references is not None and len(references) != len(documents):
                raise UserError(f"--reference has {len(references)} documents and --corpus {len(documents)}; "
                                "pass line-aligned translations")  # fmt: skip
            source = load_tokenizer(new_from) if new_from else None
            reports = {}
            for spec in tokenizer:
                loaded = load_tokenizer(spec)
                new_ids = None
                if source is not None:
                    shared = token_overlap(source, loaded).target_to_source
                    new_ids = [i for i in range(len(loaded)) if i not in shared]
                parallel = ParallelText(references) if references is not None else None
                reports[spec] = fertility_report(loaded, documents, reference=parallel, new_token_ids=new_ids,
                                                 name=spec).as_dict()
        if as_json:
            typer.echo(json.dumps(reports, indent=2))
            return
        _print_table(reports)


def _print_table(reports: dict[str, dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="fertility")
    table.add_column("tokenizer")
    for column in COLUMNS:
        table.add_column(column.replace("_", " "), justify="right")
    for name, report in reports.items():
        table.add_row(name, *("" if report[c] is None else f"{report[c]:.4f}" for c in COLUMNS))
    Console().print(table)
