"""How commands end when something goes wrong.

- A user error (``vocadapt.components.errors.UserError``, ``ConfigError``) prints one ``error:`` line that names the
  input and the fix, and exits 2 (:func:`user_errors`).
- Ctrl-C prints what stopped, which MLflow runs were marked KILLED and what was kept, and exits 130
  (:func:`report_interrupt`); the pipelines remove their partial outputs on the way out.
- Anything else is a bug: its traceback goes to a log file under ``$VOCADAPT_HOME/logs`` (default
  ``~/.cache/vocadapt/logs``), and one line names the error and that file; exit 1 (:func:`report_internal_error`).

``cli/app.py``'s command group calls the last two around every command.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path

import typer
from rich.console import Console

from vocadapt.components.errors import UserError

console = Console(stderr=True, soft_wrap=True)

EXIT_USER_ERROR = 2
EXIT_INTERNAL_ERROR = 1
EXIT_INTERRUPTED = 130  # as a shell reports a command stopped by Ctrl-C


# What each command leaves behind when Ctrl-C stops it (its pipeline removes the rest on the way out).
PARTIAL_OUTPUTS = {
    "adapt": "the half-built output folder (runs/<name>/.<language>.staging) was removed",
    "init": "the half-written --out was removed (it is written under a temporary name)",
    "tokenizer": "the half-written --out was removed (it is written under a temporary name)",
    "sweep": "finished trials' results were kept; `vocadapt sweep --resume` continues it",
    "evaluate": "its temporary work folder was removed (a --work-dir you gave keeps what was written so far)",
    "config": "nothing was written",
    "fertility": "nothing was written",
    "params": "nothing was written",
}


@contextlib.contextmanager
def user_errors(*kinds: type[BaseException]) -> Iterator[None]:
    """Print ``error: <message>`` for UserError, ConfigError and the given kinds, and exit 2."""
    from vocadapt.platform.config import ConfigError
    from vocadapt.platform.tracking import redact_value

    try:
        yield
    except (UserError, ConfigError, *kinds) as error:
        # a message may quote the input it refuses: URI credentials in it are stripped like in every log
        console.print(f"[bold red]error:[/] {redact_value(str(error))}", markup=True, highlight=False)
        raise typer.Exit(code=EXIT_USER_ERROR) from error


def logs_dir() -> Path:
    """Where internal errors' tracebacks go: ``$VOCADAPT_HOME/logs`` (default ``~/.cache/vocadapt/logs``)."""
    from vocadapt.platform.assets.embedded import vocadapt_home

    return vocadapt_home() / "logs"


def write_error_log(command: str, error: BaseException) -> Path:
    """The command line and the traceback (URI credentials masked) in ``logs/<command>-<UTC time>-<pid>.log``."""
    from vocadapt.platform.tracking import redact_value

    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    folder = logs_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{command.replace(' ', '-')}-{stamp}-{os.getpid()}.log"
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    path.write_text(redact_value(f"command: vocadapt {' '.join(sys.argv[1:])}\n\n{text}"), encoding="utf-8")
    return path


def report_internal_error(command: str, error: BaseException) -> None:
    """One line naming the error and the log holding its traceback; exit 1."""
    from vocadapt.platform.tracking import redact_value

    try:
        where = f"the traceback is in {write_error_log(command, error)}"
    except OSError as log_error:  # an unwritable home must not hide the original error
        where = f"the traceback could not be written ({log_error}); it follows:\n" + "".join(
            traceback.format_exception(type(error), error, error.__traceback__))
    summary = redact_value(f"{type(error).__name__}: {error}".splitlines()[0][:300])
    console.print(f"[bold red]internal error[/] in `vocadapt {command}`: {summary}. This is a bug in vocadapt, not "
                  f"in your input; {where} (attach it to a bug report)", markup=True, highlight=False)
    raise typer.Exit(code=EXIT_INTERNAL_ERROR) from error


def report_interrupt(command: str) -> None:
    """What Ctrl-C stopped, which MLflow runs it marked KILLED and what was kept; exit 130."""
    from vocadapt.platform.tracking import KILLED_RUNS

    killed = ", ".join(f"{name} ({run_id})" for name, run_id in KILLED_RUNS)
    runs = f"MLflow runs marked KILLED: {killed}" if killed else "no MLflow run was open"
    partial = PARTIAL_OUTPUTS.get(command.split()[0], "files it had written so far were left where they are")
    console.print(f"interrupted: `vocadapt {command}` stopped; {runs}; {partial}. Kept as they were: everything "
                  "that existed before it started (earlier runs and outputs, the registry).", markup=False,
                  highlight=False)
    KILLED_RUNS.clear()
    raise typer.Exit(code=EXIT_INTERRUPTED)
