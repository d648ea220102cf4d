"""Recording the bad-input cases for the README table: with ``VOCADAPT_BAD_INPUT_TABLE=FILE`` set, each case
appends one JSON line (case, command line, exit code, message) to FILE; ``bad_input_table.py`` prints the table."""

from __future__ import annotations

import json
import os
from pathlib import Path


def _shorten(text: str, world_root: Path, cwd: Path) -> str:
    """The case's folder becomes ``./``; the world's, the repository's and the home folder's paths are shortened,
    so the table reads the same on every machine."""
    repository = str(Path(__file__).resolve().parents[2])
    text = text.replace(str(cwd) + "/", "./").replace(str(cwd), ".").replace(str(world_root) + "/", "")
    return text.replace(repository + "/", "").replace(str(Path.home()), "~")


def record_case(case: str, args: list[str], result, *, world_root: Path, cwd: Path) -> None:
    target = os.environ.get("VOCADAPT_BAD_INPUT_TABLE")
    if not target:
        return
    message = " ".join(result.output.split())
    if "error:" in message:
        message = message[message.index("error:"):]
    row = {"case": case, "command": _shorten("vocadapt " + " ".join(args), world_root, cwd),
           "exit_code": result.exit_code, "message": _shorten(message, world_root, cwd)}
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(row, ensure_ascii=False) + "\n")
