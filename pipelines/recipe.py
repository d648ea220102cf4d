"""One adaptation recipe: the pieces ``adapt`` and ``leaderboard`` share, built once, and one context per stage.

A :class:`Recipe` holds what every method of a run is initialised from and scored against: the config, the resolved
inputs, the tracker and the console, the working folder, the artefact cache (a sweep's or the leaderboard's), the
lineage tags, the held-out text, the source tokenizer and model, the target tokenizer and the vocabulary change,
the source model's bits per byte, the helper and the run's energy ledger. The pipelines fill it top to bottom
(:meth:`Recipe.read_held_out`, :meth:`Recipe.train_tokenizer`, :meth:`Recipe.score_source`,
:meth:`Recipe.build_helper`) and hand it on whole instead of passing its values along by position.

:meth:`Recipe.stage` is every stage's context: the console's rule, energy and CO2 measured with ``measure_stage``
and added to the run's ledger (and to a method's own, for a :class:`MethodRun`). :meth:`Recipe.initialise` gives a
method's model in memory; the caller scores it there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from vocadapt.pipelines.vocabulary_steps import (
    build_helper, further_held_out, held_out_bits_per_byte, measure_stage, train_target_tokenizer,
)
from vocadapt.platform.assets.sources import ResolvedInputs, read_documents
from vocadapt.platform.config import ExperimentConfig
from vocadapt.platform.energy import EnergyLedger, EnergyReading
from vocadapt.platform.tracking import Tracker, git_commit, sha256_files, sha256_tree

if TYPE_CHECKING:
    from vocadapt.components.initializers import ConfiguredInitializer


def lineage_tags(config: ExperimentConfig, inputs: ResolvedInputs) -> dict[str, str]:
    """The tags every run of a recipe carries: source model, target language, code commit, corpus checksum."""
    return {
        "vocadapt.source_model": config.source.model if not inputs.embedded else "SmolLM2-135M-Instruct (embedded)",
        "vocadapt.target_language": config.target.language,
        "vocadapt.git_commit": git_commit(),
        "vocadapt.corpus_sha256": sha256_files(list(inputs.corpus_files)),
    }


@dataclass
class Recipe:
    """The shared pieces of one adapt or leaderboard run (see the module doc); filled as the run goes."""

    config: ExperimentConfig
    inputs: ResolvedInputs
    tracker: Tracker
    console: Console
    workdir: Path
    cache: Any = None  # platform/sweeps/cache.py's ArtefactCache, or None to compute everything here
    lineage: dict[str, str] = field(default_factory=dict)  # lineage_tags unless given
    energy: EnergyLedger | None = None  # every stage's energy, the methods' included
    parent_id: str = ""  # the parent run, once open
    side_by_side: Any = None  # pipelines/side_by_side.py's items every model is scored on (adapt), or None
    held_out: dict[str, list[str]] = field(default_factory=dict)  # stream -> documents
    source_tokenizer: Any = None
    source_model: Any = None
    replacement: Any = None  # the vocabulary change: .tokenizer, .target_to_source, .new_token_ids
    tokenizer_dir: Path | None = None
    tokenizer_sha: str = ""
    source_bpb: dict[str, float] = field(default_factory=dict)
    helper: Any = None

    def __post_init__(self) -> None:
        if not self.lineage:
            self.lineage = lineage_tags(self.config, self.inputs)
        if self.energy is None:
            self.energy = EnergyLedger(self.config.tracking.country_iso_code)

    @property
    def target_tokenizer(self):
        return self.replacement.tokenizer

    @contextmanager
    def stage(self, kind: str, title: str | None = None,
              ledgers: tuple[EnergyLedger, ...] = ()) -> Iterator[EnergyReading]:
        """One stage: ``title`` as the console's rule, its energy measured as ``kind`` (``tokenizer``, ``init``,
        ``evaluation``, ``merge``) and added to the run's ledger and to ``ledgers``; nothing is added when the
        stage fails."""
        if title is not None:
            self.console.rule(title)
        with measure_stage(self.config, kind) as reading:
            yield reading
        for ledger in (*ledgers, self.energy):
            ledger.add(reading)

    def read_held_out(self) -> None:
        """The held-out documents of every stream (``target``, ``source``, ``target_<code>`` for each further one
        of target.languages) and the source tokenizer (unless the checks already loaded it)."""
        from vocadapt.platform.model_loading import load_source_tokenizer

        config, inputs = self.config, self.inputs
        self.held_out = {
            "target": read_documents(inputs.target_validation, config.evaluation.max_documents),
            "source": read_documents(inputs.source_validation, config.evaluation.max_documents),
        } | further_held_out(config, inputs)
        if self.source_tokenizer is None:
            self.source_tokenizer = load_source_tokenizer(config, inputs.source_model)

    def train_tokenizer(self, title: str, pretrained: Any = None) -> None:
        """Train (or take ``pretrained``) the target tokenizer and change the source vocabulary with it, as the
        ``tokenizer`` stage; tags the parent run with the saved tokenizer's checksum."""
        with self.stage("tokenizer", title):
            _, self.replacement, self.tokenizer_dir = train_target_tokenizer(
                self.config, self.inputs, self.source_tokenizer, self.workdir, self.cache, pretrained)
        self.tokenizer_sha = sha256_tree(self.tokenizer_dir)
        self.tracker.set_tags(self.parent_id, {"vocadapt.tokenizer_sha256": self.tokenizer_sha})

    def score_source(self, title: str) -> None:
        """Load the source model and score its held-out bits per byte (from the cache when there is one), as an
        ``evaluation`` stage."""
        from vocadapt.platform.model_loading import load_source_model

        self.console.rule(title)
        self.source_model = load_source_model(self.config, self.inputs.source_model)

        def score() -> dict[str, float]:
            return held_out_bits_per_byte(self.source_model, self.source_tokenizer, self.held_out, self.config)

        with self.stage("evaluation"):
            if self.cache is None:
                self.source_bpb = score()
            else:
                self.source_bpb = self.cache.source_bits_per_byte(self.config, self.inputs, score)

    def build_helper(self) -> Any:
        """The helper ``init.helper`` names, trained on the target-tokenized corpus (from the cache when there is
        one); the caller measures it as part of the ``init`` stage and keeps it in :attr:`helper`."""
        def build():
            return build_helper(self.config, self.target_tokenizer, self.inputs)

        return build() if self.cache is None else self.cache.helper(self.config, self.inputs, self.tokenizer_sha,
                                                                    build)

    def initialise(self, method: ConfiguredInitializer):
        """(model, record): a copy of the source model with its vocabulary replaced (or expanded) and the new rows
        set by ``method``, in memory; the record is what the model's config carries as ``vocadapt_init``."""
        import copy

        from vocadapt.components.surgery import Initialisation, RowLayout, adapt_embeddings

        config = self.config
        model = adapt_embeddings(
            copy.deepcopy(self.source_model),
            Initialisation(method, seed=config.seed, helper=self.helper if method.needs_helper else None,
                           corpus_files=[str(p) for p in self.inputs.target_train]),
            source_tokenizer=self.source_tokenizer,
            target_tokenizer=self.target_tokenizer,
            layout=RowLayout(
                "replace" if config.init.mode == "trim" else config.init.mode,  # a trim replaces, copying every row
                target_to_source=self.replacement.target_to_source,
                new_target_ids=self.replacement.new_token_ids,
            ),
        )
        return model, dict(model.config.vocadapt_init)

    def method_run(self, initializer: ConfiguredInitializer, run_id: str) -> MethodRun:
        return MethodRun(self, initializer, run_id, EnergyLedger(self.config.tracking.country_iso_code))

    def log_method_params(self, run_id: str, name: str, options: dict[str, Any]) -> None:
        """A method's child run parameters: the method, the mode, the helper and its options."""
        self.tracker.log_params(run_id, {"method": name, "mode": self.config.init.mode,
                                         "helper": self.config.init.helper,
                                         **{f"option.{k}": v for k, v in options.items()}})


@dataclass
class MethodRun:
    """One method's child run within a recipe: its stages' energy goes to its own ledger and to the recipe's."""

    recipe: Recipe
    initializer: ConfiguredInitializer
    run_id: str
    energy: EnergyLedger

    @property
    def method(self) -> str:
        return self.initializer.name

    def stage(self, kind: str) -> Any:
        return self.recipe.stage(kind, ledgers=(self.energy,))

    def account(self, reading: EnergyReading) -> None:
        """A reading measured elsewhere (LAPT's, in the Ray workers)."""
        self.energy.add(reading)
        self.recipe.energy.add(reading)
