"""The ``vocadapt`` command line.

Each command lives in ``cli/commands/<name>.py`` with a ``register(app)`` function and is found automatically,
so a new command touches no shared file. Command modules import heavy libraries inside the command, so ``--help``
stays fast.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys

import typer
from typer.core import TyperGroup


class _CommandGroup(TyperGroup):
    """Every command runs inside one net: Ctrl-C prints what stopped and what was kept (exit 130); an unexpected
    exception writes its traceback to a log file and prints one line naming it (exit 1). User errors are handled
    in the commands (``cli/errors.py::user_errors``, exit 2); click's own exits and usage errors pass through."""

    def invoke(self, ctx: typer.Context):
        from vocadapt.cli.errors import report_internal_error, report_interrupt

        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException, SystemExit):  # typer's exits and usage errors
            raise
        except KeyboardInterrupt:
            report_interrupt(_command_name(ctx))
        except Exception as error:
            report_internal_error(_command_name(ctx), error)


def _command_name(ctx: typer.Context) -> str:
    """The command that ran: ``adapt``, ``tokenizer`` (the group, for ``tokenizer train``)."""
    return ctx.invoked_subcommand or "?"


app = typer.Typer(
    cls=_CommandGroup,
    name="vocadapt",
    help="Adapt an English-first LLM to another language by changing its vocabulary.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


# Rich draws tables to the terminal's width, and to 80 columns when the output is a file or a pipe (a log, CI):
# there the widest tables (the side-by-side, the gates) were cut. A log gets this width instead; COLUMNS, when set,
# still wins.
LOG_COLUMNS = 160


@app.callback()
def _root() -> None:
    """Adapt an English-first LLM to another language by changing its vocabulary."""
    if not sys.stdout.isatty() and "COLUMNS" not in os.environ:
        os.environ["COLUMNS"] = str(LOG_COLUMNS)


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
