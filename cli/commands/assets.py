"""``vocadapt assets``: build (once) and show the embedded default: SmolLM2-135M-Instruct and its corpora."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from vocadapt.cli.errors import user_errors


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
        family: list[str] = typer.Option(
            [], "--family", help="Fetch a model family's real tokenizer instead (repeatable; 'all' for every family "
            "of platform/families/families.yaml): llama3_1, llama2, mistral_v1, qwen3, gemma3, deepseek_v3."
        ),
    ) -> None:
        """Build the embedded default (model and corpora) under $VOCADAPT_HOME; instant when already built.

        With --family, fetch the real tokenizers of the model families people adapt (sha256-checked, with their
        chat templates and special tokens) under $VOCADAPT_HOME/families instead."""
        import time

        from rich.console import Console
        from rich.table import Table

        if family:
            _fetch_families(family, home, force)
            return

        from vocadapt.platform.assets.embedded import build_assets

        console = Console(stderr=True)
        started = time.perf_counter()
        with user_errors():
            assets = build_assets(home=home, languages=lang, force=force, console=console)
        table = Table(title=f"embedded default under {assets.home}")
        for column in ("file", "lines", "MB", "sha256"):
            table.add_column(column, justify="right" if column in ("lines", "MB") else "left")
        asked = {"en", *(code.lower() for code in lang)}
        for relative, info in sorted(assets.manifest["files"].items()):
            if relative.startswith("corpora/") and _language_of(relative) not in asked:
                continue  # built earlier for another language: `vocadapt assets --lang XX` shows it
            lines = f"{info['lines']:,}" if "lines" in info else ""
            table.add_row(relative, lines, f"{info['bytes'] / 1e6:.2f}", info["sha256"][:12])
        Console().print(table)
        Console().print(_corpus_summary(assets.manifest, asked))
        typer.echo(f"model: {assets.model_dir}  ({time.perf_counter() - started:.1f} s)")


def _fetch_families(names: list[str], home: Optional[Path], force: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    from vocadapt.platform.families.assets import fetch_families

    console = Console(stderr=True)
    with user_errors():
        entries = fetch_families([] if "all" in names else names, home=home, force=force,
                                 log=lambda line: console.print(line, highlight=False))
    table = Table(title="model family tokenizers")
    for column in ("family", "hub id", "package", "licence", "files"):
        table.add_column(column)
    for name, entry in entries.items():
        files = ", ".join(f"{file} {info['sha256'][:12]}" for file, info in entry["files"].items())
        table.add_row(name, entry["hub_id"], f"{entry['package']} {entry['version']}", entry["licence"], files)
    Console().print(table)


def _largest(counts: dict[str, int], shown: int = 5) -> str:
    """The most frequent labels first, e.g. ``en 4187, es 927``."""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:shown]
    return "(" + ", ".join(f"{label} {count}" for label, count in ranked) + ")"


def _language_of(relative: str) -> str:
    """``corpora/it/train.txt`` -> "it"; ``corpora/parallel/it-en/test.jsonl`` -> "it"."""
    parts = relative.split("/")
    return parts[2].rsplit("-en", 1)[0] if parts[1] == "parallel" else parts[1]


def _corpus_summary(manifest: dict, asked: set[str]):
    """A table per language: units by source, lines per split, and what the build dropped and why."""
    from rich.table import Table

    table = Table(title="corpora (units are paragraphs or verses, one per line)")
    for column in ("lang", "units by source", "train / val / test", "dropped: lang id", "untranslated", "duplicates"):
        table.add_column(column)
    for language, entry in sorted(manifest["corpora"].items()):
        if language not in asked:
            continue
        dropped = entry.get("dropped", {})
        language_id = dropped.get("language_id", {})
        lines = entry.get("lines", {})
        table.add_row(
            language,
            ", ".join(f"{source} {count:,}" for source, count in sorted(entry["units"].items())),
            " / ".join(f"{lines.get(split, 0):,}" for split in ("train", "validation", "test")),
            f"{language_id.get('total', 0):,} {_largest(language_id.get('by_label', {}), shown=3)}",
            f"{dropped.get('identical_to_english', 0):,}",
            f"{dropped.get('duplicates', 0):,}",
        )
    return table
