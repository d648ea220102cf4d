"""``vocadapt config``: show the resolved config or its schema."""

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
    ) -> None:
        """Validate a config and print it resolved (or print the schema)."""
        import yaml

        from vocadapt.platform.config import ExperimentConfig, load_config

        if schema:
            typer.echo(json.dumps(ExperimentConfig.model_json_schema(), indent=2))
            return
        with user_errors():
            config = load_config(path, set_)
        from vocadapt.platform.tracking import redact_tree

        # credentials in URIs and secret fields are masked: this output ends up in logs and bug reports
        typer.echo(yaml.safe_dump(redact_tree(config.model_dump(mode="json")), sort_keys=False))
