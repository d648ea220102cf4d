"""The ``vocadapt`` command line.

Each command lives in ``cli/commands/<name>.py`` with a ``register(app)`` function and is found automatically,
so a new command touches no shared file. Command modules import heavy libraries inside the command, so ``--help``
stays fast.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import typer

app = typer.Typer(
    name="vocadapt",
    help="Adapt an English-first LLM to another language by changing its vocabulary.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """Adapt an English-first LLM to another language by changing its vocabulary."""


def _register_commands() -> None:
    from vocadapt.cli import commands

    for module in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if not module.name.startswith("_"):
            importlib.import_module(f"{commands.__name__}.{module.name}").register(app)


_register_commands()


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
