"""Print (or write into README.md) the table of bad-input cases: input, exit code, message.

Runs ``test_bad_input_commands.py``'s table with ``VOCADAPT_BAD_INPUT_TABLE`` set, so the table shows what the
commands really print. Usage, from the repository root:

    .venv/bin/python tests/pipelines/bad_input_table.py            # print the Markdown table
    .venv/bin/python tests/pipelines/bad_input_table.py --write     # replace it in README.md between the markers
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
START, END = "<!-- bad-input table: start -->", "<!-- bad-input table: end -->"
LONGEST = 260  # characters of a message shown; the rest is cut with an ellipsis


def collect() -> list[dict]:
    with tempfile.TemporaryDirectory() as folder:
        rows = Path(folder) / "rows.jsonl"
        command = [sys.executable, "-m", "pytest", "-q", "-k", "test_bad_input_is_refused",
                   "tests/pipelines/test_bad_input_commands.py"]
        completed = subprocess.run(command, cwd=ROOT, env={**os.environ, "VOCADAPT_BAD_INPUT_TABLE": str(rows)})
        if completed.returncode != 0:
            raise SystemExit(f"the bad-input suite failed (exit {completed.returncode}); fix it before the table")
        return [json.loads(line) for line in rows.read_text(encoding="utf-8").splitlines()]


def markdown(rows: list[dict]) -> str:
    lines = ["| input | exit | message |", "| --- | --- | --- |"]
    for row in rows:
        message = row["message"] if len(row["message"]) <= LONGEST else row["message"][:LONGEST] + "…"
        cells = (row["case"], str(row["exit_code"]), message.replace("|", "\\|").replace("`", "'"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    table = markdown(collect())
    if "--write" not in argv:
        print(table)
        return 0
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"README.md has no {START} ... {END} markers")
    head, rest = text.split(START, 1)
    readme.write_text(f"{head}{START}\n{table}\n{END}{rest.split(END, 1)[1]}", encoding="utf-8")
    print(f"README.md: {table.count(chr(10)) - 1} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
