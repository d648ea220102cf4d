"""The ``leaderboard`` pipeline: score initialisers zero-shot, one source model and one target tokenizer, ranked.

Reads top to bottom: setup (choose and check the methods, the inputs and the source model before any run exists),
then one MLflow parent run holding the shared pieces (the target tokenizer, the source model's bits per byte), one
child run per method (initialise the new rows, score held-out text in bits per byte, nothing trained), and the
ranked table (metrics on the parent, ``leaderboard.json`` and ``leaderboard.md`` artifacts). Energy and CO2 are
measured per stage as ``vocadapt adapt`` measures them: each method's initialisation and scoring on its child run
(``energy.init.kwh``, ``energy.evaluation.kwh``, ...), the per-stage sums over the whole leaderboard (tokenizer,
helper and source scores included) on the parent, and each method's total beside its rank. The trained target
tokenizer, the source model's bits per byte and a trained helper are kept in an artefact cache keyed by exactly
their inputs (``platform/sweeps/cache.py``), so a second leaderboard on the same inputs only initialises and scores.
No model is written to disk and nothing is registered: it ranks starting points, ``vocadapt adapt`` trains them.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from vocadapt.components.errors import UserError
from vocadapt.pipelines.preflight import check_corpora, resolve_methods
from vocadapt.pipelines.recipe import Recipe, lineage_tags
from vocadapt.pipelines.vocabulary_steps import held_out_bits_per_byte, language_streams
from vocadapt.platform.config import ExperimentConfig
from vocadapt.platform.energy import log_energy
from vocadapt.platform.assets.sources import resolve_inputs
from vocadapt.platform.sweeps.cache import ArtefactCache
from vocadapt.platform.tracking import Tracker, resolve_tracking_uri

if TYPE_CHECKING:
    from vocadapt.components.initializers import ConfiguredInitializer

LEADERBOARD_TAG = "vocadapt.leaderboard"  # on the parent run; the dashboard finds leaderboards by it
CACHE_FOLDER = "leaderboard-cache"  # under <output_dir>/<name>/


@dataclass
class LeaderboardRow:
    """One method's zero-shot scores: bits per byte on the held-out ``target`` and ``source``-language text (and
    ``target_<code>`` for each further one of target.languages)."""

    method: str
    run_id: str
    bits_per_byte: dict[str, float]
    init_seconds: float
    rank: int = 0
    energy_kwh: float | None = None  # initialisation and scoring together; None when energy is not measured
    kg_co2eq: float | None = None


@dataclass
class LeaderboardResult:
    parent_run_id: str
    experiment_id: str
    tracking_uri: str
    source_bits_per_byte: dict[str, float]
    rows: list[LeaderboardRow]  # ranked, best (lowest target bits per byte, mean over target languages) first
    skipped: dict[str, str] = field(default_factory=dict)  # method -> why it was not scored
    languages: dict[str, str] = field(default_factory=dict)  # stream -> language code

    def record(self) -> dict[str, Any]:
        return {
            "ranked_by": "bits per byte on held-out target-language text, zero-shot (lower is better; with several "
                         "target languages, the mean over them)",
            "languages": self.languages,
            "source_model": self.source_bits_per_byte,
            "methods": [{"rank": row.rank, "method": row.method, "run_id": row.run_id,
                         "bits_per_byte": row.bits_per_byte, "init_seconds": row.init_seconds,
                         "energy_kwh": row.energy_kwh, "kg_co2eq": row.kg_co2eq} for row in self.rows],
            "skipped": self.skipped,
        }


def run_leaderboard(
    config: ExperimentConfig,
    methods: list[str] | None = None,
    console: Console | None = None,
    *,
    cache_dir: Path | None = None,
) -> LeaderboardResult:
    """Score ``methods`` (default: every registered initialiser; those needing a helper are skipped, with the
    reason, when ``init.helper`` is not set) zero-shot on the config's held-out text, ranked."""
    console = console or Console()
    # ---- setup: bad input fails here, before any run, cache entry or file exists
    config, skipped = choose_methods(config, methods)
    configured = resolve_methods(config)
    inputs = resolve_inputs(config)
    from vocadapt.platform.model_loading import check_model_folder

    check_model_folder(inputs.source_model, what="source.model", trust_remote_code=config.source.trust_remote_code)
    cache = ArtefactCache(Path(cache_dir) if cache_dir else Path(config.output_dir) / config.name / CACHE_FOLDER)
    check_corpora(config, inputs, console, cache)
    tracker = Tracker(resolve_tracking_uri(config.tracking.tracking_uri), config.tracking.experiment)
    lineage = lineage_tags(config, inputs)
    recipe = Recipe(config, inputs, tracker, console, Path(tempfile.mkdtemp(prefix="vocadapt-leaderboard-")), cache,
                    lineage)
    try:
        with tracker.run(f"{config.name}/leaderboard", tags=recipe.lineage | {LEADERBOARD_TAG: "zero-shot"}) as parent:
            recipe.parent_id = parent_id = parent.info.run_id
            tracker.log_params(parent_id, config.flat())
            recipe.read_held_out()
            recipe.train_tokenizer("[bold]target tokenizer (cached)")
            replacement = recipe.replacement
            tracker.log_metrics(parent_id, {"tokens_copied": len(replacement.target_to_source),
                                            "tokens_initialised": len(replacement.new_token_ids)})
            console.print(f"  {len(recipe.target_tokenizer):,} ids: {len(replacement.target_to_source):,} copied, "
                          f"{len(replacement.new_token_ids):,} to initialise ({cache.events.get('tokenizer')})")

            recipe.score_source("[bold]source model, zero-shot bits per byte (cached)")
            tracker.log_metrics(parent_id, {f"source_model.bpb_{k}": v for k, v in recipe.source_bpb.items()})

            if any(method.needs_helper for method in configured.values()):
                # a helper is part of initialising, as in adapt
                with recipe.stage("init", f"[bold]helper {config.init.helper} (cached)"):
                    recipe.helper = recipe.build_helper()
            rows = []
            for name, method in configured.items():
                console.rule(f"[bold]{name}")
                row = score_method(recipe, name, method)
                rows.append(row)
                console.print(f"  {name}: " + ", ".join(f"{k}={v:.3f}" for k, v in row.bits_per_byte.items())
                              + f" ({row.init_seconds} s)")
            recipe.source_model = None
            log_energy(tracker, parent_id, recipe.energy)

            result = LeaderboardResult(parent_id, tracker.experiment_id, tracker.tracking_uri, recipe.source_bpb,
                                       rank(rows), skipped, dict(language_streams(config)))
            log_leaderboard(tracker, parent_id, result)
    finally:
        shutil.rmtree(recipe.workdir, ignore_errors=True)
    return result


def score_method(recipe: Recipe, name: str, method: ConfiguredInitializer) -> LeaderboardRow:
    """One method on its own child run of the recipe's parent: initialise, score the held-out text in memory, log
    the scores and the energy of both stages there (they are added to the recipe's ledger too)."""
    config, tracker = recipe.config, recipe.tracker
    with tracker.run(f"{config.name}/leaderboard/{name}", parent_run_id=recipe.parent_id,
                     tags=recipe.lineage) as child:
        run = recipe.method_run(method, child.info.run_id)
        recipe.log_method_params(run.run_id, name, method.options)
        started = time.perf_counter()
        with run.stage("init"):
            model, record = recipe.initialise(method)
        seconds = round(time.perf_counter() - started, 2)
        with run.stage("evaluation"):
            bpb = held_out_bits_per_byte(model, recipe.target_tokenizer, recipe.held_out, config)
        del model
        tracker.log_metrics(run.run_id, {"init_seconds": seconds,
                                         **{f"bpb_{k}_zero_shot": v for k, v in bpb.items()}}, step=0)
        tracker.log_dict(run.run_id, record, "initialisation.json")
        log_energy(tracker, run.run_id, run.energy)
    row = LeaderboardRow(name, run.run_id, bpb, seconds)
    if run.energy.stages:
        totals = run.energy.metrics()
        row.energy_kwh, row.kg_co2eq = totals["energy.total.kwh"], totals["emissions.total.kg_co2eq"]
    return row


def choose_methods(config: ExperimentConfig, methods: list[str] | None) -> tuple[ExperimentConfig, dict[str, str]]:
    """The config with ``init.methods`` set to the methods to score, and the methods skipped with why.

    Named methods must all exist (an unknown one is refused with the nearest name); with none named, every
    registered method is scored, except those needing a helper when ``init.helper`` is not set."""
    from vocadapt.components.initializers import available_initializers, get_initializer

    skipped: dict[str, str] = {}
    if methods:
        chosen = []
        for name in methods:
            try:
                get_initializer(name)
            except KeyError as error:
                raise UserError(f"methods: {error.args[0]}") from error
            if name not in chosen:
                chosen.append(name)
    else:
        chosen = available_initializers()
        if not config.init.helper:
            skipped = {name: "needs a helper and init.helper is not set" for name in chosen
                       if get_initializer(name).needs_helper}
            chosen = [name for name in chosen if name not in skipped]
    if not chosen:
        raise UserError("methods: nothing to score; name at least one initialiser")
    options = {name: value for name, value in config.init.options.items() if name in chosen}
    init = config.init.model_copy(update={"methods": chosen, "options": options})
    return config.model_copy(update={"init": init}), skipped


def target_mean(bits_per_byte: dict[str, float]) -> float:
    """The mean bits per byte over the target-language streams (``target``, ``target_<code>``): the one target
    language's value with one."""
    values = [value for stream, value in bits_per_byte.items() if stream.startswith("target")]
    return sum(values) / len(values)


def rank(rows: list[LeaderboardRow]) -> list[LeaderboardRow]:
    """Best first: lowest bits per byte on the target-language text (the mean over the target languages with
    several), then on the source-language text, then name (so ties are ranked the same way every time)."""
    ordered = sorted(rows, key=lambda row: (target_mean(row.bits_per_byte), row.bits_per_byte.get("source", 0.0),
                                            row.method))
    for position, row in enumerate(ordered, start=1):
        row.rank = position
    return ordered


def markdown_table(result: LeaderboardResult) -> str:
    """The ranked table as Markdown, the source model as the reference row. With several target languages, one
    bits-per-byte column per language and the vs-source column on their mean."""
    streams = [stream for stream in result.languages if stream.startswith("target")] or ["target"]
    several = len(streams) > 1
    names = {stream: result.languages.get(stream, stream) for stream in [*streams, "source"]}
    versus = f"mean of {', '.join(names[stream] for stream in streams)}" if several else names["target"]
    columns = [f"{names[stream]} bits per byte" for stream in [*streams, "source"]]
    lines = ["| rank | method | " + " | ".join(columns) + f" | vs source model ({versus}) | init s | "
             "Wh (init + scoring) |", "| --- | --- | " + "--- | " * len(columns) + "--- | --- | --- |"]
    source = result.source_bits_per_byte
    reference = target_mean(source) if all(stream in source for stream in streams) else None
    values = lambda scores: " | ".join(f"{scores.get(stream, float('nan')):.3f}"  # noqa: E731
                                       for stream in [*streams, "source"])
    for row in result.rows:
        delta = f"{target_mean(row.bits_per_byte) - reference:+.3f}" if reference is not None else ""
        lines.append(f"| {row.rank} | {row.method} | {values(row.bits_per_byte)} | {delta} | {row.init_seconds:.1f} | "
                     f"{watt_hours(row.energy_kwh)} |")
    blank = " |" * len(columns)
    lines.append(f"| | source model (its own tokenizer) | {values(source)} | | | |")
    for method, why in result.skipped.items():
        lines.append(f"| | {method} (skipped: {why}) |{blank} | | |")
    return "\n".join(lines) + "\n"


def watt_hours(kwh: float | None) -> str:
    """A method's energy for the tables, in watt-hours (a 135M model's initialisation is a fraction of one);
    empty when it was not measured."""
    return "" if kwh is None else f"{kwh * 1000:.3g}"


def log_leaderboard(tracker: Tracker, parent_id: str, result: LeaderboardResult) -> None:
    """Per-method metrics on the parent (``leaderboard.<method>.rank`` / ``.bpb_target`` / ``.bpb_source`` /
    ``.init_seconds``, and ``.energy_kwh`` / ``.kg_co2eq`` when measured), the best method as a tag, the table as
    ``leaderboard.json`` and ``leaderboard.md``."""
    metrics = {}
    for row in result.rows:
        metrics[f"leaderboard.{row.method}.rank"] = row.rank
        metrics.update({f"leaderboard.{row.method}.bpb_{k}": v for k, v in row.bits_per_byte.items()})
        metrics[f"leaderboard.{row.method}.init_seconds"] = row.init_seconds
        if row.energy_kwh is not None:
            metrics[f"leaderboard.{row.method}.energy_kwh"] = row.energy_kwh
            metrics[f"leaderboard.{row.method}.kg_co2eq"] = row.kg_co2eq
    tracker.log_metrics(parent_id, metrics)
    if result.rows:
        tracker.set_tags(parent_id, {"vocadapt.leaderboard_best": result.rows[0].method})
    tracker.log_dict(parent_id, result.record(), "leaderboard.json")
    tracker.log_text(parent_id, markdown_table(result), "leaderboard.md")
