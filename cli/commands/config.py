"""``vocadapt config``: check a config the way ``adapt`` does and show it resolved (or show its schema)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from vocadapt.cli.errors import user_errors


def register(app: typer.Typer) -> None:
    @app.command("config")
    def config_command(
        path: Optional[Path] = typer.Argument(None, help="YAML config; omitted: the defaults."),
        set_: list[str] = typer.Option([], "--set", help="Dotted override, e.g. lapt.max_steps=5 (repeatable)."),
        schema: bool = typer.Option(False, "--schema", help="Print the JSON schema with every field's description."),
        check_files: bool = typer.Option(
            False, "--check-files", help="Also run adapt's file checks: output folder, source model folder, "
            "teacher, target tokenizer, helper files, every corpus (UTF-8, lines, language, expectation suite), and that "
            "this machine's Ray cluster can place LAPT's workers."
        ),
        overwrite: bool = typer.Option(False, "--overwrite", help="With --check-files: accept an existing output "
                                       "folder, as `vocadapt adapt --overwrite` would."),
    ) -> None:
        """Check a config with the same checks `vocadapt adapt` runs first, then print it resolved."""
        import yaml

        from vocadapt.platform.config import ExperimentConfig, load_config

        if schema:
            typer.echo(json.dumps(ExperimentConfig.model_json_schema(), indent=2))
            return
        from rich.console import Console

        from vocadapt.pipelines.preflight import preflight

        with user_errors():
            config = load_config(path, set_)
            # adapt's own setup checks: a config printed here is one adapt starts (files too with --check-files)
            preflight(config, check_files=check_files, overwrite=overwrite, console=Console(stderr=True))
        from vocadapt.platform.tracking import redact_tree

        # credentials in URIs and secret fields are masked: this output ends up in logs and bug reports
        typer.echo(yaml.safe_dump(redact_tree(config.model_dump(mode="json")), sort_keys=False))
