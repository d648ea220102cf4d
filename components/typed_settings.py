"""The base of every typed settings model, from a component's settings to the platform's config sections.

Unknown keys are refused at every level with the key's name and the nearest valid one: a misspelt field (or a field
one schema has and another lacks) stops the run instead of being dropped without a word. Only pydantic is imported.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import PydanticCustomError

UNKNOWN_FIELD = "unknown_field"


def unknown_field_message(name: str, valid: Iterable[str]) -> str:
    """``"lerning_rate: unknown field; did you mean learning_rate?"``, or the valid names when none is close."""
    valid = sorted(valid)
    close = difflib.get_close_matches(name, valid, n=1)
    hint = f"did you mean {close[0]}?" if close else f"valid fields: {', '.join(valid)}"
    return f"{name}: unknown field; {hint}"


class StrictSettings(BaseModel):
    """A pydantic model that refuses unknown keys, naming each with its nearest valid field."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # NaN or infinity is never a setting

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, values: Any) -> Any:
        if isinstance(values, dict):
            unknown = [key for key in values if key not in cls.model_fields]
            if unknown:
                messages = [unknown_field_message(str(key), cls.model_fields) for key in unknown]
                raise PydanticCustomError(UNKNOWN_FIELD, "{message}", {"message": "; ".join(messages),
                                                                         "messages": messages})
        return values


def validation_problems(error: ValidationError, prefix: str = "") -> list[str]:
    """One line per problem, each starting with the dotted field it concerns (``prefix``, e.g. "lapt", before it)."""
    lines = []
    for item in error.errors():
        where = ".".join(str(part) for part in ([prefix] if prefix else []) + list(item["loc"]))
        if item["type"] == UNKNOWN_FIELD:
            lines += [f"{where}.{message}" if where else message for message in item["ctx"]["messages"]]
        else:
            given = item.get("input")
            # a section's own check (loc: the section) gets the whole section as input: naming it is enough, and
            # repeating it would print every value of the config (secrets included)
            got = "" if isinstance(given, dict) else f" (got {given!r})"
            message = item["msg"].removeprefix("Value error, ")
            lines.append(f"{where or '(top level)'}: {message}{got}")
    return lines
