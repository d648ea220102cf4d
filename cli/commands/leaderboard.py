"""``vocadapt leaderboard``: rank initialisers by zero-shot bits per byte on held-out text."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from vocadapt.cli.errors import user_errors

# The demo's config (the embedded SmolLM2-135M, its Italian corpora, a 16,384-token Italian BPE, fastText helper).
DEMO_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "italian-smollm2.yaml"


def register(app: typer.Typer) -> None:
    @app.command("leaderboard")
    def leaderboard_command(
        config_path: Optional[Path] = typer.Argument(
            None, metavar="CONFIG", help="Experiment YAML (source model, corpora, target tokenizer); omitted: "
            "configs/italian-smollm2.yaml (the embedded SmolLM2-135M and its Italian corpora, a 16,384-token Italian "
            "BPE, a fastText helper)."
        ),
        methods: list[str] = typer.Option(
            [], "--method", "-m", help="Initialiser to score (repeatable, or comma-separated); omitted: every "
            "registered one (those needing a helper only when init.helper is set)."),
        set_: list[str] = typer.Option([], "--set", help="Dotted override, e.g. evaluation.max_documents=16."),
        cache: Optional[Path] = typer.Option(
            None, "--cache", help="Folder of the cached tokenizer, helper and source scores; default "
            "<output_dir>/<name>/leaderboard-cache."),
        json_out: Optional[Path] = typer.Option(None, "--json", help="Also write the ranked table as JSON here."),
    ) -> None:
        """Initialise the new rows with each method and score held-out text zero-shot (no training): a ranked table
        on the console and in MLflow (one parent run, a child per method, leaderboard.md / leaderboard.json)."""
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from vocadapt.pipelines.leaderboard import run_leaderboard
        from vocadapt.platform.config import load_config

        chosen = [name.strip() for value in methods for name in value.split(",") if name.strip()]
        with user_errors():
            config = load_config(config_path or DEMO_CONFIG, set_)
            result = run_leaderboard(config, chosen or None, cache_dir=cache)
        _print_table(result)
        if json_out:
            import json

            json_out.write_text(json.dumps(result.record(), indent=2) + "\n", encoding="utf-8")


def _print_table(result) -> None:
    from rich.console import Console
    from rich.table import Table

    from vocadapt.pipelines.leaderboard import watt_hours

    target, source = result.languages["target"], result.languages["source"]
    table = Table("rank", "method", f"{target} bits/byte", f"{source} bits/byte", f"vs source ({target})", "init s",
                  "Wh", title="zero-shot held-out bits per byte (lower is better)")
    reference = result.source_bits_per_byte.get("target")
    for row in result.rows:
        table.add_row(str(row.rank), row.method, f"{row.bits_per_byte['target']:.3f}",
                      f"{row.bits_per_byte.get('source', float('nan')):.3f}",
                      f"{row.bits_per_byte['target'] - reference:+.3f}" if reference is not None else "",
                      f"{row.init_seconds:.1f}", watt_hours(row.energy_kwh))
    table.add_row("", "source model (own tokenizer)", f"{result.source_bits_per_byte.get('target', float('nan')):.3f}",
                  f"{result.source_bits_per_byte.get('source', float('nan')):.3f}", "", "", "")
    console = Console()
    console.print(table)
    for method, why in result.skipped.items():
        console.print(f"skipped {method}: {why}")
    console.print(f"MLflow: run {result.parent_run_id} in experiment {result.experiment_id} ({result.tracking_uri})")
