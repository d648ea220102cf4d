"""Reading the user's text, JSON and JSON-lines files so that a bad byte or a syntax error names the file, the
line and the fix (a bare ``UnicodeDecodeError`` or ``JSONDecodeError`` names neither)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vocadapt.components.collector import parse_json
from vocadapt.components.errors import UserError


def read_text(path: str | Path, what: str) -> str:
    """The file's text; a UserError naming ``what``, the file, line and byte when it is not UTF-8."""
    path = Path(path)
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        column = error.start - (raw.rfind(b"\n", 0, error.start) + 1) + 1
        raise UserError(f"{what} {path}, line {line}: byte 0x{raw[error.start]:02x} at column {column} is not UTF-8; "
                        f"re-encode the file as UTF-8 (e.g. `iconv -f LATIN1 -t UTF-8 {path}`)") from None


def read_json(path: str | Path, what: str, fix: str = "fix the JSON syntax there") -> Any:
    """One JSON document; a UserError naming ``what``, the file, line and column of a syntax error, and ``fix``."""
    text = read_text(path, what)
    try:
        return parse_json(text)  # a tokenizer.json among them: hundreds of thousands of containers
    except json.JSONDecodeError as error:
        raise UserError(f"{what} {path}, line {error.lineno}, column {error.colno}: not valid JSON ({error.msg}); "
                        f"{fix}") from None


def read_jsonl(path: str | Path, what: str, fix: str = "write one JSON object per line") -> list[Any]:
    """One JSON document per non-blank line; a UserError naming ``what``, the file and line of the first bad one."""
    records = []
    for number, line in enumerate(read_text(path, what).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise UserError(f"{what} {path}, line {number}, column {error.colno}: not valid JSON ({error.msg}); "
                            f"{fix}") from None
    return records


def refuse_output_over_inputs(output: str | Path, flag: str, inputs: list[tuple[str, str | Path | None]]) -> None:
    """Refuse an output path that is an input, holds one, or lies inside an input folder: writing it (or replacing
    it under ``--overwrite``) would overwrite or delete that input. ``inputs``: (flag or field, path) pairs; None
    and names that are not local paths (hub ids) are skipped. Paths are compared after resolving links."""
    out = Path(output).expanduser().resolve()
    for what, given in inputs:
        if given is None or str(given) == "" or not Path(given).expanduser().exists():
            continue
        source = Path(given).expanduser().resolve()
        if out == source:
            relation = "is"
        elif source.is_relative_to(out):
            relation = "holds"
        elif out.is_relative_to(source):
            relation = "lies inside"
        else:
            continue
        raise UserError(f"{flag} {output} {relation} the input {what} {given}: writing it would overwrite or delete "
                        f"that input, --overwrite included; nothing was written. Give {flag} a new folder outside "
                        "every input")
