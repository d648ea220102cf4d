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
from typing import Any

from rich.console import Console

from vocadapt.components.errors import UserError
from vocadapt.pipelines.preflight import check_corpora, resolve_methods
from vocadapt.pipelines.vocabulary_steps import (
    build_helper, further_held_out, held_out_bits_per_byte, initialise_method, language_streams, measure_stage,
    train_target_tokenizer,
)
from vocadapt.platform.config import ExperimentConfig
from vocadapt.platform.energy import EnergyLedger, log_energy
from vocadapt.platform.assets.sources import read_documents, resolve_inputs
from vocadapt.platform.sweeps.cache import ArtefactCache
from vocadapt.platform.tracking import Tracker, git_commit, resolve_tracking_uri, sha256_files, sha256_tree

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
    from vocadapt.platform.model_loading import check_model_folder, load_source_model, load_source_tokenizer

    check_model_folder(inputs.source_model, what="source.model", trust_remote_code=config.source.trust_remote_code)
    cache = ArtefactCache(Path(cache_dir) if cache_dir else Path(config.output_dir) / config.name / CACHE_FOLDER)
    check_corpora(config, inputs, console, cache)
    tracker = Tracker(resolve_tracking_uri(config.tracking.tracking_uri), config.tracking.experiment)
    lineage = {
        "vocadapt.source_model": config.source.model if not inputs.embedded else "SmolLM2-135M-Instruct (embedded)",
        "vocadapt.target_language": config.target.language,
        "vocadapt.git_commit": git_commit(),
        "vocadapt.corpus_sha256": sha256_files(list(inputs.corpus_files)),
    }
    workdir = Path(tempfile.mkdtemp(prefix="vocadapt-leaderboard-"))
    try:
        with tracker.run(f"{config.name}/leaderboard", tags=lineage | {LEADERBOARD_TAG: "zero-shot"}) as parent:
            parent_id = parent.info.run_id
            energy = EnergyLedger(config.tracking.country_iso_code)  # every stage, the children's included
            tracker.log_params(parent_id, config.flat())
            held_out = {
                "target": read_documents(inputs.target_validation, config.evaluation.max_documents),
                "source": read_documents(inputs.source_validation, config.evaluation.max_documents),
            } | further_held_out(config, inputs)  # target_<code>: target.languages after the first
            source_tokenizer = load_source_tokenizer(config, inputs.source_model)

            console.rule("[bold]target tokenizer (cached)")
            with measure_stage(config, "tokenizer") as reading:
                target_tokenizer, replacement, tokenizer_dir = train_target_tokenizer(
                    config, inputs, source_tokenizer, workdir, cache)
            energy.add(reading)
            tokenizer_sha = sha256_tree(tokenizer_dir)
            tracker.set_tags(parent_id, {"vocadapt.tokenizer_sha256": tokenizer_sha})
            tracker.log_metrics(parent_id, {"tokens_copied": len(replacement.target_to_source),
                                            "tokens_initialised": len(replacement.new_token_ids)})
            console.print(f"  {len(target_tokenizer):,} ids: {len(replacement.target_to_source):,} copied, "
                          f"{len(replacement.new_token_ids):,} to initialise ({cache.events.get('tokenizer')})")

            console.rule("[bold]source model, zero-shot bits per byte (cached)")
            source_model = load_source_model(config, inputs.source_model)
            with measure_stage(config, "evaluation") as reading:
                source_bpb = cache.source_bits_per_byte(
                    config, inputs, lambda: held_out_bits_per_byte(source_model, source_tokenizer, held_out, config))
            energy.add(reading)
            tracker.log_metrics(parent_id, {f"source_model.bpb_{k}": v for k, v in source_bpb.items()})

            helper = None
            if any(method.needs_helper for method in configured.values()):
                console.rule(f"[bold]helper {config.init.helper} (cached)")
                with measure_stage(config, "init") as reading:  # a helper is part of initialising, as in adapt
                    helper = cache.helper(config, inputs, tokenizer_sha,
                                          lambda: build_helper(config, target_tokenizer, inputs))
                energy.add(reading)
            rows = []
            for name, method in configured.items():
                console.rule(f"[bold]{name}")
                shared = (source_model, source_tokenizer, target_tokenizer, replacement, inputs, helper, held_out)
                row = score_method(config, tracker, parent_id, lineage, name, method, shared, energy)
                rows.append(row)
                console.print(f"  {name}: " + ", ".join(f"{k}={v:.3f}" for k, v in row.bits_per_byte.items())
                              + f" ({row.init_seconds} s)")
            del source_model
            log_energy(tracker, parent_id, energy)

            result = LeaderboardResult(parent_id, tracker.experiment_id, tracker.tracking_uri, source_bpb,
                                       rank(rows), skipped, dict(language_streams(config)))
            log_leaderboard(tracker, parent_id, result)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def score_method(config: ExperimentConfig, tracker: Tracker, parent_id: str, lineage: dict[str, str], name: str,
                 method: Any, shared: tuple, energy: EnergyLedger) -> LeaderboardRow:
    """One method on its own child run: initialise, score the held-out text, log the scores and the energy of both
    stages there (and add them to the parent's ``energy``). ``shared``: (source model, source tokenizer, target
    tokenizer, replacement, inputs, helper, held-out documents)."""
    source_model, source_tokenizer, target_tokenizer, replacement, inputs, helper, held_out = shared
    method_energy = EnergyLedger(config.tracking.country_iso_code)
    with tracker.run(f"{config.name}/leaderboard/{name}", parent_run_id=parent_id, tags=lineage) as child:
        run_id = child.info.run_id
        tracker.log_params(run_id, {"method": name, "mode": config.init.mode, "helper": config.init.helper,
                                    **{f"option.{k}": v for k, v in method.options.items()}})
        started = time.perf_counter()
        with measure_stage(config, "init") as reading:
            model, record = initialise_method(config, method, source_model, source_tokenizer, target_tokenizer,
                                              replacement, inputs, helper)
        seconds = round(time.perf_counter() - started, 2)
        method_energy.add(reading)
        with measure_stage(config, "evaluation") as reading:
            bpb = held_out_bits_per_byte(model, target_tokenizer, held_out, config)
        method_energy.add(reading)
        del model
        tracker.log_metrics(run_id, {"init_seconds": seconds, **{f"bpb_{k}_zero_shot": v for k, v in bpb.items()}},
                            step=0)
        tracker.log_dict(run_id, record, "initialisation.json")
        log_energy(tracker, run_id, method_energy)
    for stage in method_energy.stages.values():
        energy.add(stage)
    row = LeaderboardRow(name, run_id, bpb, seconds)
    if method_energy.stages:
        totals = method_energy.metrics()
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
