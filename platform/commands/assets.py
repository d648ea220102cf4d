"""``vocadapt assets``: build (once) and show the embedded default: SmolLM2-135M-Instruct and its corpora."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from vocadapt.platform.commands._errors import user_errors


def register(app: typer.Typer) -> None:
    @app.command("assets")
    def assets_command(
        lang: list[str] = typer.Option(
            ["it"], "--lang", help="Target language to build corpora for (repeatable); English is always built."
        ),
        force: bool = typer.Option(False, "--force", help="Rebuild everything asked for, even if already built."),
        home: Optional[Path] = typer.Option(
            None, "--home", help="Where to build; default $VOCADAPT_HOME or ~/.cache/vocadapt."
        ),
    ) -> None:
        """Build the embedded default (model and corpora) under $VOCADAPT_HOME; instant when already built."""
        import time

        from rich.console import Console
        from rich.table import Table

        from vocadapt.platform.assets import build_assets

        console = Console(stderr=True)
        started = time.perf_counter()
        with user_errors():
            assets = build_assets(home=home, languages=lang, force=force, console=console)
        table = Table(title=f"embedded default under {assets.home}")
        for column in ("file", "lines", "MB", "sha256"):
            table.add_column(column, justify="right" if column in ("lines", "MB") else "left")
        for relative, info in sorted(assets.manifest["files"].items()):
            lines = f"{info['lines']:,}" if "lines" in info else ""
            table.add_row(relative, lines, f"{info['bytes'] / 1e6:.2f}", info["sha256"][:12])
        Console().print(table)
        for language, entry in sorted(assets.manifest["corpora"].items()):
            dropped = entry.get("dropped", {})
            by_label = dropped.get("language_id", {})
            typer.echo(
                f"{language}: units {entry['units']}; dropped: {by_label.get('total', 0)} by language id "
                f"{_largest(by_label.get('by_label', {}))}, "
                f"{dropped.get('identical_to_english', 0)} untranslated, {dropped.get('duplicates', 0)} duplicates"
            )
        typer.echo(f"model: {assets.model_dir}  ({time.perf_counter() - started:.1f} s)")


def _largest(counts: dict[str, int], shown: int = 5) -> str:
    """The most frequent labels first, e.g. ``en 4187, es 927``."""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:shown]
    return "(" + ", ".join(f"{label} {count}" for label, count in ranked) + ")"
