"""The initialiser registry: one file per method, each a decorated pure function, found automatically.

A method is ``components/initializers/<name>.py`` holding::

    @register_initializer("fvt", aliases=("mean",), needs_helper=False)
    def fvt(problem: InitProblem, *, some_option: float = 1.0) -> torch.Tensor:
        '''Returns (len(problem.new_target_ids), hidden) rows for the tokens to initialise.'''

Its keyword-only parameters, with their defaults, are the options a config may set (``init.options.<name>``); the
registry reads them from the signature and rejects unknown ones before any work.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import torch


@dataclass
class InitProblem:
    """Everything a method may read to initialise the new rows of one matrix (input embeddings or LM head).

    source_matrix: (V_source_rows, hidden) rows of the source model for this matrix, float32.
    new_target_ids: (N,) target ids whose rows the method must produce, in this order.
    overlap: target id -> source id for tokens shared by both vocabularies (canonical bytes + word-start flag).
    source_tokenizer, target_tokenizer: transformers tokenizers.
    role: "input" or "output" (the LM head); an untied model is initialised once per role, each from its own matrix.
    generator: seeded torch.Generator; the only source of randomness a method may use.
    helper: what a helper-based method reads (helper embeddings for target tokens, fastText vectors...), or None.
    corpus_files: target-language training text, for methods that count or align on a corpus.
    """

    source_matrix: torch.Tensor
    new_target_ids: torch.Tensor
    overlap: dict[int, int]
    source_tokenizer: Any
    target_tokenizer: Any
    role: str = "input"
    generator: torch.Generator = field(default_factory=lambda: torch.Generator().manual_seed(0))
    helper: Any = None
    corpus_files: list[str] = field(default_factory=list)


class InitializerFunction(Protocol):
    def __call__(self, problem: InitProblem, **options: Any) -> torch.Tensor: ...


@dataclass(frozen=True)
class Initializer:
    name: str
    function: InitializerFunction
    needs_helper: bool
    helpers: tuple[str, ...]
    aliases: tuple[str, ...]

    @property
    def options(self) -> dict[str, Any]:
        """Keyword-only parameters of the method with their defaults."""
        signature = inspect.signature(self.function)
        return {
            name: parameter.default
            for name, parameter in signature.parameters.items()
            if parameter.kind is inspect.Parameter.KEYWORD_ONLY
        }

    def check_options(self, options: dict[str, Any]) -> None:
        unknown = set(options) - set(self.options)
        if unknown:
            raise ValueError(
                f"initialiser {self.name!r} has no option(s) {sorted(unknown)}; it accepts {sorted(self.options)}"
            )


_REGISTRY: dict[str, Initializer] = {}
_DISCOVERED = False


def register_initializer(
    name: str,
    *,
    aliases: tuple[str, ...] = (),
    needs_helper: bool = False,
    helpers: tuple[str, ...] = (),
) -> Callable[[InitializerFunction], InitializerFunction]:
    """Register ``function`` under ``name`` (and its aliases). ``helpers`` names the helper kinds it accepts."""

    def decorate(function: InitializerFunction) -> InitializerFunction:
        entry = Initializer(name, function, needs_helper, helpers, aliases)
        for key in (name, *aliases):
            if key in _REGISTRY and _REGISTRY[key].function is not function:
                raise ValueError(f"initialiser name {key!r} is registered twice")
            _REGISTRY[key] = entry
        return function

    return decorate


def _discover() -> None:
    global _DISCOVERED
    if _DISCOVERED:
        return
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")
    _DISCOVERED = True


def available_initializers() -> list[str]:
    """Primary names of every registered method, sorted."""
    _discover()
    return sorted({entry.name for entry in _REGISTRY.values()})


def get_initializer(name: str) -> Initializer:
    _discover()
    if name not in _REGISTRY:
        raise KeyError(
            f"unknown initialiser {name!r}; choose one of {', '.join(available_initializers())}"
        )
    return _REGISTRY[name]
