"""``vocadapt adapt``: the main job."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from vocadapt.cli.errors import user_errors


def register(app: typer.Typer) -> None:
    @app.command("adapt")
    def adapt_command(
        config_path: Optional[Path] = typer.Argument(
            None, metavar="CONFIG", help="Experiment YAML (e.g. configs/italian-smollm2.yaml); omitted: defaults."
        ),
        set_: list[str] = typer.Option([], "--set", help="Dotted override, e.g. lapt.max_steps=5 (repeatable)."),
        json_out: Optional[Path] = typer.Option(None, "--json", help="Also write a JSON summary to this file."),
        overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing <output_dir>/<name>/<language> "
                                       "(only once the new run has finished); without it an existing one is refused."),
    ) -> None:
        """Check corpora, train the target tokenizer, replace the vocabulary, initialise, LAPT, track, register."""
        from vocadapt.pipelines.adapt import run_adapt
        from vocadapt.pipelines.adapt_report import summary_json
        from vocadapt.platform.config import load_config

        with user_errors():
            config = load_config(config_path, set_)
            result = run_adapt(config, overwrite=overwrite)
        if json_out:
            json_out.write_text(summary_json(result), encoding="utf-8")
