"""A cache of one costly result, reused only for the very same objects it was computed from."""

from __future__ import annotations

import weakref
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


class LastTensorResult:
    """A :class:`LastResultCache` for results computed from one tensor each (a source matrix's per-column
    statistics), keeping the last ``slots`` of them (two: an untied model's input embeddings and LM head, which each
    method reads in turn) and holding each tensor weakly, so a matrix of gigabytes is not kept alive by its result.

    A result is reused only while its very tensor is alive and unchanged: torch's version counter counts every
    in-place write to the tensor or to any view of its storage. An inference tensor (no version counter) is never
    cached."""

    def __init__(self, slots: int = 2) -> None:
        self._slots = slots
        self._entries: list[tuple[weakref.ref, int, Any]] = []  # (tensor, its version, result), newest last

    def get(self, tensor: Any, compute: Callable[[], Any]) -> Any:
        try:
            version = tensor._version
        except RuntimeError:  # an inference tensor
            return compute()
        for entry in self._entries:
            if entry[0]() is tensor and entry[1] == version:
                return entry[2]
        value = compute()
        live = [entry for entry in self._entries if entry[0]() is not None and entry[0]() is not tensor]
        self._entries = live[len(live) - self._slots + 1:] + [(weakref.ref(tensor), version, value)]
        return value
