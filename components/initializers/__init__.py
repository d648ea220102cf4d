"""The initialiser registry: one file per method, each a decorated pure function, found automatically.

A method is ``components/initializers/<name>.py`` holding::

    @register_initializer("fvt", aliases=("mean",), needs_helper=False)
    def fvt(problem: InitProblem, *, some_option: float = 1.0) -> torch.Tensor:
        '''Returns (len(problem.new_target_ids), hidden) rows for the tokens to initialise.'''

Its keyword-only parameters, with their defaults, are the options a config may set (``init.options.<name>``); the
registry reads them from the signature and rejects unknown ones before any work. A run resolves each method once
(:func:`configure_initializer`) and hands the :class:`ConfiguredInitializer` down; the registry also answers which
methods need a helper and which helpers each accepts.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Protocol

import torch

from vocadapt.components.typed_settings import unknown_field_message


@dataclass
class InitProblem:
    """Everything a method may read to initialise the new rows of one matrix (input embeddings or LM head).

    source_matrix: (V_source_rows, hidden) rows of the source model for this matrix, in the checkpoint's dtype
        (bf16, fp16 or float32). A method reads the rows it needs as float32 (:func:`read_source_rows`, or
        ``_common.gathered_rows`` for a sum over rows, ``_common.source_mean_std`` for per-column statistics), never
        a float32 copy of the whole matrix (2.1 GB at Llama-3.1-8B's 128,256 x 4,096, beside the 1 GB bf16 one).
    new_target_ids: (N,) target ids whose rows the method must produce, in this order.
    overlap: target id -> source id for tokens shared by both vocabularies (canonical bytes + word-start flag).
    source_tokenizer, target_tokenizer: transformers tokenizers.
    role: "input" or "output" (the LM head); an untied model is initialised once per role, each from its own matrix.
    generator: seeded torch.Generator; the only source of randomness a method may use.
    helper: what a helper-based method reads (helper embeddings for target tokens, fastText vectors...), or None.
    corpus_files: target-language training text, for methods that count or align on a corpus.
    columns: (first column, full hidden size) when ``source_matrix`` is a column block of a wider matrix (streamed
        surgery); None for a whole matrix. Only a ``columnwise`` method's random fallback rows read it
        (``_common.columnwise_gaussian_rows``), so they are the same block by block as on the whole matrix.
    notes: where a method writes a value it chose that its options left open (OMP's ``k`` when the default adapts
        it): the records show it among the effective options (:meth:`ConfiguredInitializer.effective_options`).

    A ``row_blocks`` method under streamed surgery gets a :class:`SourceRows` as ``source_matrix`` instead of a tensor
    (the rows stay on disk); it reads rows through :func:`read_source_rows`, which serves both.
    """

    source_matrix: "torch.Tensor | SourceRows"
    new_target_ids: torch.Tensor
    overlap: dict[int, int]
    source_tokenizer: Any
    target_tokenizer: Any
    role: str = "input"
    generator: torch.Generator = field(default_factory=lambda: torch.Generator().manual_seed(0))
    helper: Any = None
    corpus_files: list[str] = field(default_factory=list)
    columns: tuple[int, int] | None = None
    notes: dict[str, Any] = field(default_factory=dict)


class SourceRows(Protocol):
    """A source matrix read by rows on demand (streamed surgery of a ``row_blocks`` method): its ``shape`` and
    ``rows(ids)``, the float32 rows of ``ids`` (an (n,) int64 tensor) in that order."""

    shape: tuple[int, int]

    def rows(self, ids: torch.Tensor) -> torch.Tensor: ...


def read_source_rows(problem: InitProblem, ids: torch.Tensor) -> torch.Tensor:
    """Float32 source rows of ``ids``, from the matrix in memory or, under streamed surgery, from disk: the same
    values either way (a bf16 or fp16 row converts to float32 exactly)."""
    matrix = problem.source_matrix
    if isinstance(matrix, torch.Tensor):
        if len(ids) > 1 and int(ids[-1]) - int(ids[0]) + 1 == len(ids) and bool((torch.diff(ids) == 1).all()):
            # consecutive rows (most chunks of an expansion's shared tokens): a slice converts twice as fast as a
            # gather (4,096 x 7,168 bf16: 71 -> 36 ms); copy=True, so a float32 matrix is never handed out as a view
            return matrix[int(ids[0]) : int(ids[-1]) + 1].to(torch.float32, copy=True)
        return matrix[ids].float()
    return matrix.rows(ids)


class InitializerFunction(Protocol):
    def __call__(self, problem: InitProblem, **options: Any) -> torch.Tensor: ...


@dataclass(frozen=True)
class Initializer:
    name: str
    function: InitializerFunction
    needs_helper: bool
    helpers: tuple[str, ...]
    aliases: tuple[str, ...]
    columnwise: bool = False
    row_block_function: Callable[..., Iterator[torch.Tensor]] | None = None

    @property
    def row_blocks(self) -> bool:
        return self.row_block_function is not None

    @property
    def options(self) -> dict[str, Any]:
        """Keyword-only parameters of the method with their defaults."""
        signature = inspect.signature(self.function)
        return {
            name: parameter.default
            for name, parameter in signature.parameters.items()
            if parameter.kind is inspect.Parameter.KEYWORD_ONLY
        }

    def check_options(self, options: dict[str, Any]) -> dict[str, Any]:
        """Unknown options are refused, each with the nearest option the method has; a value that is not of its
        parameter's type (``jitter=abc`` for a float, ``k=2.5`` for an int, NaN or infinity) is refused naming the
        type. Returns the options as the method receives them (an int given for a float becomes that float)."""
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            hints = "; ".join(unknown_field_message(name, self.options) for name in unknown)
            raise ValueError(f"initialiser {self.name!r} has no option(s) {unknown} ({hints}); "
                             f"it accepts {sorted(self.options) or 'none'}")
        return {name: _typed_option(self, name, value) for name, value in options.items()}

    def configure(self, options: dict[str, Any] | None = None, *, requested_as: str | None = None
                  ) -> ConfiguredInitializer:
        """This method with ``options``, checked once here."""
        return ConfiguredInitializer(self, self.check_options(options or {}), requested_as or self.name)


def _typed_option(initializer: Initializer, name: str, value: Any) -> Any:
    """``value`` checked against the type of the method's keyword-only parameter ``name`` (its annotation, else
    the type of its default), in pydantic's strict mode except that an int is taken for a float."""
    import typing

    from pydantic import ConfigDict, TypeAdapter, ValidationError

    function = initializer.row_block_function or initializer.function
    try:
        annotation = typing.get_type_hints(function).get(name)
    except (NameError, TypeError):
        annotation = None
    default = initializer.options[name]
    if annotation is None:
        if not isinstance(default, (bool, int, float, str)):
            return value
        annotation = type(default)
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    try:
        adapter = TypeAdapter(annotation, config=ConfigDict(strict=True, allow_inf_nan=False))
    except Exception:  # a type pydantic cannot check (a tensor, a tokenizer): the method checks it
        return value
    try:
        return adapter.validate_python(value)
    except ValidationError as error:
        expected = getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")
        problem = error.errors()[0]["msg"]
        raise ValueError(f"initialiser {initializer.name!r} option {name}={value!r}: {problem} ({expected} "
                         f"expected, default {default!r}); give a value of that type") from None


class MissingHelperError(ValueError):
    """A method that needs a helper was given none; the message names the helpers it accepts and the methods that
    need none (the command line or the pipeline adds how to give one: a flag, a config field)."""

    def __init__(self, initializer: Initializer) -> None:
        self.initializer = initializer
        accepted = ", ".join(initializer.helpers) or "a helper"
        super().__init__(
            f"initialiser {initializer.name!r} needs a helper ({accepted}) and none was given; give one, or choose "
            f"a method without a helper: {', '.join(available_initializers(needs_helper=False))}"
        )


@dataclass(frozen=True)
class ConfiguredInitializer:
    """An initialiser resolved from the registry once, with its options checked once; what surgery runs."""

    initializer: Initializer
    options: dict[str, Any]
    name: str  # as the caller asked for it (an alias stays an alias in the records)
    notes: dict[str, Any] = field(default_factory=dict, compare=False)  # what the method chose (InitProblem.notes)

    def effective_options(self) -> dict[str, Any]:
        """Every option as the method ran with it: its defaults, the options given, and what it chose where a
        default adapts (after it ran); what the records keep beside the options given."""
        return {**self.initializer.options, **self.options, **self.notes}

    @property
    def needs_helper(self) -> bool:
        return self.initializer.needs_helper

    @property
    def columnwise(self) -> bool:
        return self.initializer.columnwise

    @property
    def row_blocks(self) -> bool:
        return self.initializer.row_blocks

    def blocks(self, problem: InitProblem) -> Iterator[torch.Tensor]:
        """A ``row_blocks`` method's new rows as consecutive row blocks (streamed surgery writes each as it comes)."""
        if self.initializer.row_block_function is None:
            raise TypeError(f"initialiser {self.name!r} is not registered row_blocks")
        return self.initializer.row_block_function(problem, **self.options)

    def check_helper(self, helper: Any) -> None:
        """MissingHelperError when the method needs a helper and ``helper`` is None."""
        if self.needs_helper and helper is None:
            raise MissingHelperError(self.initializer)

    def __call__(self, problem: InitProblem) -> torch.Tensor:
        return self.initializer.function(problem, **self.options)


_REGISTRY: dict[str, Initializer] = {}
_DISCOVERED = False


def register_initializer(
    name: str,
    *,
    aliases: tuple[str, ...] = (),
    needs_helper: bool = False,
    helpers: tuple[str, ...] = (),
    columnwise: bool = False,
    row_blocks: bool = False,
) -> Callable[[InitializerFunction], InitializerFunction]:
    """Register ``function`` under ``name`` (and its aliases). ``helpers`` names the helper kinds it accepts.

    columnwise: column j of the new rows depends only on column j of ``source_matrix`` and on nothing that depends
        on the hidden size (its random draws included), so the method run on column blocks of the source matrix
        gives the same rows, block by block. Surgery on a checkpoint then streams the matrix a column block at a
        time and its memory stays bounded whatever the vocabulary or hidden size (``components/surgery/streaming.py``);
        ``tests/initializers/test_bounded_memory.py`` checks the claim for every method that makes it.
    row_blocks: the function is a generator that yields the new rows as consecutive row blocks and reads the source
        matrix only through :func:`read_source_rows` (and its ``shape``), a bounded number of rows at a time. For a
        method whose row depends on every column (multivariate's covariance, sava's normalised rows): streamed
        surgery gives it the source on disk and writes each block as it comes, so its memory is bounded by its own
        statistics (a hidden x hidden covariance, a helper x hidden map), not by the vocabulary. The registry's
        ``function`` concatenates the blocks, so every other caller gets a tensor as from any method.
    """

    def decorate(function: InitializerFunction) -> InitializerFunction:
        whole = function
        if row_blocks:
            def concatenated(problem: InitProblem, **options: Any) -> torch.Tensor:
                blocks = list(function(problem, **options))
                width = problem.source_matrix.shape[1]
                return torch.cat(blocks) if blocks else torch.zeros(0, width, dtype=torch.float32)

            # options come from the generator's signature
            concatenated.__signature__ = inspect.signature(function)  # type: ignore[attr-defined]
            whole = concatenated
        entry = Initializer(name, whole, needs_helper, helpers, aliases, columnwise,
                            function if row_blocks else None)
        for key in (name, *aliases):
            if key in _REGISTRY and _REGISTRY[key].function is not whole:
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


def available_initializers(*, needs_helper: bool | None = None) -> list[str]:
    """Primary names of every registered method, sorted; ``needs_helper`` keeps those that do (True) or don't."""
    _discover()
    return sorted({entry.name for entry in _REGISTRY.values()
                   if needs_helper is None or entry.needs_helper == needs_helper})


def get_initializer(name: str) -> Initializer:
    _discover()
    if name not in _REGISTRY:
        close = difflib.get_close_matches(name, list(_REGISTRY), n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise KeyError(f"unknown initialiser {name!r}; {hint}choose one of {', '.join(available_initializers())}")
    return _REGISTRY[name]


def configure_initializer(method: str | ConfiguredInitializer, options: dict[str, Any] | None = None
                          ) -> ConfiguredInitializer:
    """The method looked up once and its options checked once (a ConfiguredInitializer is returned as it is).

    KeyError for an unknown name, ValueError for an unknown option; both name the nearest valid one."""
    if isinstance(method, ConfiguredInitializer):
        if options:
            raise ValueError(f"initialiser {method.name!r} is already configured; give its options there")
        return method
    return get_initializer(method).configure(options, requested_as=method)
