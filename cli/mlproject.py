"""Entry-point shim for ``MLproject``: turns ``--overrides 'a.b=1 c.d=x'`` into repeated ``--set`` options.

``mlflow run`` passes parameters as strings; a space-separated list of dotted overrides is the simplest form a user
can type on the ``-P`` option. ``mlflow run`` also sets ``MLFLOW_RUN_ID`` for its own run; the pipeline opens its
runs explicitly, so the variable is removed here and cannot leak into Ray workers.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vocadapt-mlproject")
    parser.add_argument("entry_point")
    parser.add_argument("--config", default=None)
    parser.add_argument("--overrides", default="")
    parser.add_argument("--overwrite", default="false", help="'true': pass --overwrite (the adapt entry point)")
    args, rest = parser.parse_known_args(argv)
    os.environ.pop("MLFLOW_RUN_ID", None)
    rest = _drop_empty_options(rest)
    command = [args.entry_point]
    if args.config:
        command.append(args.config)
    for override in shlex.split(args.overrides):
        command += ["--set", override]
    if args.overwrite.strip().lower() in ("true", "1", "yes"):
        command.append("--overwrite")
    from vocadapt.cli.app import app

    return app(command + rest, standalone_mode=True) or 0


def _drop_empty_options(arguments: list[str]) -> list[str]:
    """``--option ''`` (an MLproject parameter left at its empty default) means the option was not given."""
    kept: list[str] = []
    index = 0
    while index < len(arguments):
        current = arguments[index]
        following = arguments[index + 1] if index + 1 < len(arguments) else None
        if current.startswith("--") and following == "":
            index += 2
            continue
        kept.append(current)
        index += 1
    return kept


if __name__ == "__main__":
    sys.exit(main())
