"""Bounds of the command lines' numeric values, checked before any work: a count below its least value is refused
with the flag, the value and the least one (``--top-k 0`` would write an "expansion" with no new token)."""

from __future__ import annotations

from vocadapt.components.errors import UserError


def at_least(flag: str, value: int | float | None, least: int | float, meaning: str = "") -> None:
    """Refuse ``value`` below ``least``; None (not given) passes."""
    if value is not None and value < least:
        raise UserError(f"{flag} {value}: must be at least {least}{f' ({meaning})' if meaning else ''}; give "
                        f"{flag} {least} or more")
