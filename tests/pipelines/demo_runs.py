"""What the reduced-size demo-config tests share: one `vocadapt adapt` with overrides, and its Italian fertility."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from vocadapt.cli.app import app


def adapt_with_overrides(config: Path, overrides: dict[str, object], summary: Path):
    """`vocadapt adapt CONFIG --json SUMMARY --set key=value ...`; (the CLI result, the summary report). Asserts exit 0."""
    args = ["adapt", str(config), "--json", str(summary)]
    for key, value in overrides.items():
        args += ["--set", f"{key}={value}"]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result, json.loads(summary.read_text())


def italian_tokens_per_word(report: dict) -> tuple[float, float]:
    """(source tokenizer, target tokenizer) Italian tokens per word of an adapt summary."""
    fertility = report["fertility"]
    return fertility["source_tokenizer.it"]["tokens_per_word"], fertility["target_tokenizer.it"]["tokens_per_word"]
