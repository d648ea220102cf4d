"""How commands turn a user error (``vocadapt.components.errors.UserError``) into a clear message and a non-zero
exit."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import typer
from rich.console import Console

from vocadapt.components.errors import UserError

console = Console(stderr=True, soft_wrap=True)


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
        raise typer.Exit(code=2) from error
