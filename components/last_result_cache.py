"""A cache of one costly result, reused only for the very same objects it was computed from."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any


class LastResultCache:
    """Remembers the last costly result (a decomposition, corpus counts, a tokenizer's highest id) for the next
    call that asks for it.

    An untied model is initialised twice (input embeddings, then LM head) from the same tokenizers, and a method's
    second role reuses what the first computed. The entry holds references to the objects it was computed from and
    is reused only when they are the very same objects and the plain key matches (a key that says what may have
    changed in them, such as a tokenizer's length), so a stale hit is impossible.
    """

    def __init__(self) -> None:
        self._objects: tuple[Any, ...] = ()
        self._key: Hashable = None
        self._value: Any = None

    def get(self, objects: tuple[Any, ...], key: Hashable, compute: Callable[[], Any]) -> Any:
        same_objects = len(objects) == len(self._objects) and all(a is b for a, b in zip(objects, self._objects))
        if not (same_objects and key == self._key):
            self._value = compute()
            self._objects, self._key = objects, key
        return self._value
