"""The ``adapt`` pipeline: check corpora, train a target tokenizer, replace the vocabulary, initialise the new rows
with every configured method, measure, continue pre-training, measure again, track and register the best.

Reads top to bottom: setup (validate everything before any work), run, report. Every step is logged to one MLflow
parent run with one child run per method. Nothing is written to the output folder until the inputs are checked,
and the folder is built under a temporary name and renamed only when the run succeeds.

What the run returns (each method's outcome, the rule that ranks them, the run's result) is in
``pipelines/adapt_outcomes.py``; what it prints and the tables it logs are in ``pipelines/adapt_report.py``.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import yaml
from rich.console import Console

from vocadapt.components.evaluation.parameters import parameter_counts
from vocadapt.components.tokenizers.saving import save_tokenizer
from vocadapt.pipelines.adapt_outcomes import AdaptResult, MethodOutcome
from vocadapt.pipelines.adapt_report import bits_per_byte_table, expansion_summary, fertility_metrics, print_summary
from vocadapt.pipelines.fertility_steps import measure_fertility
from vocadapt.platform.config import ExperimentConfig
from vocadapt.pipelines.preflight import preflight
from vocadapt.pipelines.recipe import MethodRun, Recipe
from vocadapt.pipelines.side_by_side import equal_content_speed_up, score_adapted_model, score_source_model
from vocadapt.pipelines.vocabulary_steps import held_out_bits_per_byte, language_streams, on_scoring_device
from vocadapt.platform.energy import EnergyReading, log_energy
from vocadapt.platform.tracking import Tracker, redact_tree, resolve_tracking_uri

if TYPE_CHECKING:
    from vocadapt.pipelines.preflight import Preflight


def run_adapt(
    config: ExperimentConfig,
    console: Console | None = None,
    *,
    parent_run_id: str | None = None,
    on_metrics: Callable[[str, dict[str, float]], None] | None = None,
    cache: Any = None,
    overwrite: bool = False,
) -> AdaptResult:
    """Run the whole adaptation. ``parent_run_id`` nests the adapt run (a sweep trial's run); ``on_metrics`` is
    called with (method, {"target": bpb, "source": bpb}) right after each method's zero-shot evaluation, before
    LAPT, so a scheduler can stop a bad trial early. ``cache`` (a sweep's ``platform.sweep_cache.ArtefactCache``)
    shares the source model's bits per byte, the trained tokenizer and a trained helper between trials.
    ``overwrite`` replaces an existing ``<output_dir>/<name>/<language>``, only once the new one is complete."""
    console = console or Console()
    # ---- setup: everything that can fail on bad input fails here, before any run or file exists (the same
    # checks `vocadapt config --check-files` runs)
    checked = preflight(config, check_files=True, overwrite=overwrite, console=console, cache=cache)
    output_dir = checked.output_dir
    staging = output_dir.with_name(f".{output_dir.name}.staging")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    tracker = Tracker(resolve_tracking_uri(config.tracking.tracking_uri), config.tracking.experiment)
    try:
        recipe = Recipe(config, checked.inputs, tracker, console, staging, cache,
                        source_tokenizer=checked.source_tokenizer)
        result = _run(recipe, checked, parent_run_id, on_metrics)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _move_into_place(staging, output_dir)
    result.output_dir = output_dir
    for outcome in result.methods:
        outcome.model_dir = output_dir / outcome.model_dir.relative_to(staging)
    print_summary(result, config, console)
    return result


def _move_into_place(staging: Path, output_dir: Path) -> None:
    """``staging`` (complete) becomes ``output_dir``; an earlier folder there is set aside first and deleted only
    once the new one is in place, so at every moment one complete folder exists (put back if the move fails)."""
    aside = output_dir.with_name(f".{output_dir.name}.replaced")
    shutil.rmtree(aside, ignore_errors=True)
    if output_dir.exists():
        output_dir.rename(aside)
    try:
        staging.rename(output_dir)
    except BaseException:
        if aside.exists() and not output_dir.exists():
            aside.rename(output_dir)
        raise
    shutil.rmtree(aside, ignore_errors=True)


def _run(recipe: Recipe, checked: Preflight, parent_run_id: str | None,
         on_metrics: Callable[[str, dict[str, float]], None] | None) -> AdaptResult:
    """Everything on the MLflow parent run, in the order printed: tokenizer, fertility, the source model, each
    method on its child run, then the best method ranked, registered and kept."""
    from vocadapt.pipelines.side_by_side import items_for_config
    from vocadapt.platform.registry.gate_items import log_gate_items

    config, inputs, tracker = recipe.config, recipe.inputs, recipe.tracker
    if config.target.multilingual:  # the gates judge every language (platform/registry/gates.py::gated_languages)
        recipe.lineage["vocadapt.target_languages"] = ",".join(config.target.languages)
    recipe.side_by_side = items_for_config(config, inputs)  # may download out-of-domain text: before any run opens
    with tracker.run(config.name, parent_run_id=parent_run_id, tags=recipe.lineage) as parent:
        recipe.parent_id = parent_id = parent.info.run_id
        _log_config(recipe, checked)
        _train_tokenizer(recipe, checked)
        fertility, parent_items = measure_fertility(recipe)
        source_bpb, source_side_by_side = _score_source(recipe, parent_items)
        log_gate_items(tracker, parent_id, parent_items)
        outcomes = _adapt_every_method(recipe, checked, on_metrics)
        best, registered = _rank_and_register(recipe, outcomes)
    parent_metrics = fertility_metrics(fertility) | {f"source_model.bpb_{k}": v for k, v in source_bpb.items()}
    return AdaptResult(
        parent_id, tracker.experiment_id, tracker.tracking_uri, recipe.workdir, fertility, source_bpb, outcomes,
        best, registered, source_side_by_side, parent_metrics | source_side_by_side, parent_items,
    )


def _log_config(recipe: Recipe, checked: Preflight) -> None:
    """The config on the parent run: as flat parameters, as ``config.yaml`` (secrets redacted), and the corpus
    expectations the preflight checked."""
    config, tracker, parent_id = recipe.config, recipe.tracker, recipe.parent_id
    tracker.log_params(parent_id, config.flat())
    tracker.log_text(parent_id, yaml.safe_dump(redact_tree(config.model_dump(mode="json")), sort_keys=False),
                     "config.yaml")
    if checked.expectations is not None:
        from vocadapt.platform.data.corpus_checks import log_expectations

        log_expectations(tracker, parent_id, checked.expectations)


def _train_tokenizer(recipe: Recipe, checked: Preflight) -> None:
    """Read the held-out text, train (or take) the target tokenizer and change the vocabulary with it; log the
    tokenizer, a short vocabulary's warning and, when expanding, what the expansion added."""
    config, tracker, parent_id, console = recipe.config, recipe.tracker, recipe.parent_id, recipe.console
    recipe.read_held_out()
    recipe.train_tokenizer("[bold]2. target tokenizer", checked.pretrained_tokenizer)
    replacement = recipe.replacement
    tracker.log_artifact(parent_id, recipe.tokenizer_dir, "tokenizer")
    _warn_if_vocabulary_short(config, recipe.inputs, replacement, tracker, parent_id, console)
    if config.init.mode == "expand":
        expansion = expansion_summary(replacement, recipe.inputs)
        tracker.log_dict(parent_id, expansion, "expansion.json")
        tracker.log_metrics(parent_id, {"expansion_new_tokens": len(replacement.new_token_ids)})
        console.print(f"expanded by {len(replacement.new_token_ids):,} tokens; skipped: "
                      f"{expansion['skipped'] or 'none'}; protected lexicon: {expansion['protected_lexicon']}",
                      highlight=False)  # fmt: skip


def _score_source(recipe: Recipe, parent_items: dict[str, Any]) -> tuple[dict[str, float], dict[str, float]]:
    """The source model's held-out bits per byte and parameter counts on the parent run, then its side-by-side
    scores (their per-item parts added to ``parent_items``); returns both score tables."""
    recipe.score_source("[bold]5. source model, zero-shot bits per byte")
    source_bpb = recipe.source_bpb
    recipe.tracker.log_metrics(recipe.parent_id, {f"source_model.bpb_{k}": v for k, v in source_bpb.items()}
                               | {f"source_model.{k}": v for k, v in parameter_counts(recipe.source_model).items()})
    return source_bpb, score_source_model(recipe, parent_items)


def _adapt_every_method(recipe: Recipe, checked: Preflight,
                        on_metrics: Callable[[str, dict[str, float]], None] | None) -> list[MethodOutcome]:
    """Every configured method in turn, each on its own child run; the source model is released afterwards and
    the run's energy logged on the parent."""
    config, tracker, parent_id, methods = recipe.config, recipe.tracker, recipe.parent_id, checked.methods
    with recipe.stage("init"):  # a helper (fastText) is part of initialising the new rows
        if config.init.helper and any(method.needs_helper for method in methods.values()):
            recipe.helper = recipe.build_helper()  # else None: no listed method uses one
    outcomes = []
    for method in config.init.methods:
        recipe.console.rule(f"[bold]4-7. method {method}")
        with tracker.run(f"{config.name}/{method}", parent_run_id=parent_id, tags=recipe.lineage) as child:
            outcome = _adapt_one_method(recipe.method_run(methods[method], child.info.run_id), on_metrics)
        outcomes.append(outcome)
    recipe.source_model = None
    log_energy(tracker, parent_id, recipe.energy)
    return outcomes


def _rank_and_register(recipe: Recipe, outcomes: list[MethodOutcome]) -> tuple[MethodOutcome, tuple[str, int] | None]:
    """The best method (:meth:`MethodOutcome.score`) tagged on the parent run with every method's bits per byte,
    registered when ``tracking.register_best``; only its model stays on disk. Returns it and its registered name
    and version (None when not registered)."""
    config, tracker, parent_id = recipe.config, recipe.tracker, recipe.parent_id
    best = min(outcomes, key=MethodOutcome.score)
    tracker.set_tags(parent_id, {"vocadapt.best_method": best.method})
    tracker.log_dict(parent_id, bits_per_byte_table(outcomes, recipe.source_bpb), "bits_per_byte.json")
    registered = None
    if config.tracking.register_best:
        recipe.console.rule("[bold]8. registry")
        registered = _register(config, tracker, best,
                               recipe.lineage | {"vocadapt.tokenizer_sha256": recipe.tokenizer_sha}, parent_id,
                               recipe.console)
    _drop_other_models(outcomes, best)
    return best, registered


def _warn_if_vocabulary_short(config, inputs, change, tracker: Tracker, run_id: str, console: Console) -> None:
    """A corpus too small for ``tokenizer.vocab_size`` gives a smaller vocabulary. Known only once the tokenizer is
    trained, after the run opened, so it is a loud warning, a tag and a metric rather than a refusal (the run is
    still valid; `vocadapt tokenizer train` refuses it before writing anything)."""
    reached = len(change.tokenizer)
    tracker.log_metrics(run_id, {"tokenizer.vocab_size_reached": reached})
    if inputs.target_tokenizer or config.init.mode != "replace" or reached >= config.tokenizer.vocab_size:
        return
    warning = (f"tokenizer.vocab_size is {config.tokenizer.vocab_size:,} but the target corpus gives only "
               f"{reached:,} tokens at tokenizer.min_frequency {config.tokenizer.min_frequency}; the run goes on "
               f"with {reached:,}: set tokenizer.vocab_size <= {reached:,} to silence this, or add text")
    console.print(f"[bold yellow]warning:[/] {warning}", highlight=False)
    tracker.set_tags(run_id, {"vocadapt.warning.tokenizer_vocab_size": warning})


def continue_pretraining(recipe: Recipe, model_dir: Path, workdir: Path, run_id: str) -> dict[str, Any]:
    """LAPT through Ray Train; returns the trained model directory, its history and held-out bits per byte."""
    from vocadapt.pipelines.lapt import LaptRequest

    config = recipe.config
    request = LaptRequest(config, recipe.inputs, model_dir, f"{config.name}-{model_dir.parent.name}", workdir,
                          recipe.held_out)
    return request.run(recipe.tracker.tracking_uri, run_id)


def _adapt_one_method(run: MethodRun, on_metrics: Callable[[str, dict[str, float]], None] | None = None,
                      ) -> MethodOutcome:
    """One method on its child run; its stages' energy is logged there and added to the recipe's, the parent's.

    The model is initialised and scored in memory; its checkpoint is written for LAPT and the registry. Without
    LAPT and merge, the side-by-side benchmark scores the same model in memory too (as float32, the way a
    checkpoint is loaded), so nothing is read back from disk only to be scored."""
    recipe, method, run_id = run.recipe, run.method, run.run_id
    config, tracker = recipe.config, recipe.tracker
    recipe.log_method_params(run_id, method, config.init.options.get(method, {}))
    model, outcome, zero_shot = _initialise(run)
    final_in_memory = not config.lapt.runs and config.merge.method == "none"
    if not final_in_memory:
        del model  # LAPT and the merge start from the checkpoint; memory goes to them
    if on_metrics is not None:
        on_metrics(method, dict(zero_shot))
    if config.lapt.runs:
        _continue_pretraining_from_checkpoint(run, outcome)
    if config.merge.method != "none":  # ElChat: back into the chat model; what follows sees the merged model
        from vocadapt.pipelines.merge_step import merge_into_chat_model

        merge_into_chat_model(run, outcome)
    side_by_side = recipe.side_by_side
    if side_by_side is not None or config.evaluation.equal_content_characters:
        from vocadapt.platform.model_loading import load_checkpoint_tokenizer, load_model

        if final_in_memory:  # the checkpoint just written, as load_model reads it: float32, its saved tokenizer
            final_model, final_tokenizer = model.float().eval(), load_checkpoint_tokenizer(outcome.model_dir)
            del model
        else:
            final_model, final_tokenizer = load_model(Path(outcome.model_dir), what="adapted model")
        _score_final_model(run, outcome, final_model, final_tokenizer)
        del final_model
        tracker.log_metrics(run_id, outcome.side_by_side, step=outcome.lapt["steps"] if outcome.lapt else 0)
        from vocadapt.platform.registry.gate_items import log_gate_items

        if side_by_side is not None:
            log_gate_items(tracker, run_id, outcome.gate_items)
    elif final_in_memory:
        del model
    log_energy(tracker, run_id, run.energy)
    recipe.console.print(f"  {method}: " + ", ".join(f"{k}={v:.3f}" for k, v in outcome.bits_per_byte.items()))
    return outcome


def _initialise(run: MethodRun) -> tuple[Any, MethodOutcome, dict[str, float]]:
    """The method's rows initialised in memory, its checkpoint written to ``<workdir>/<method>/initialised`` and its
    zero-shot held-out bits per byte logged at step 0; returns the model, the outcome so far and the zero-shot
    bits per byte per stream."""
    from vocadapt.platform.model_loading import strip_custom_code

    recipe, method, run_id = run.recipe, run.method, run.run_id
    config, tracker, target_tokenizer = recipe.config, recipe.tracker, recipe.target_tokenizer
    started = time.perf_counter()
    with run.stage("init"):
        model, record = recipe.initialise(run.initializer)
        initial_dir = recipe.workdir / method / "initialised"
        model.save_pretrained(initial_dir)
        save_tokenizer(target_tokenizer, initial_dir)
        strip_custom_code(initial_dir)
    tracker.log_metrics(run_id, {"init_seconds": time.perf_counter() - started} | parameter_counts(model))
    tracker.log_dict(run_id, record, "initialisation.json")
    with run.stage("evaluation"):
        zero_shot = held_out_bits_per_byte(model, target_tokenizer, recipe.held_out, config)
    bpb = {f"{stream}_zero_shot": value for stream, value in zero_shot.items()}
    tracker.log_metrics(run_id, {f"bpb_{k}": v for k, v in bpb.items()}, step=0)
    return model, MethodOutcome(method, run_id, initial_dir, bpb, record=record), zero_shot


def _continue_pretraining_from_checkpoint(run: MethodRun, outcome: MethodOutcome) -> None:
    """LAPT from the initialised checkpoint, which is deleted afterwards: ``outcome`` takes the trained model, the
    LAPT history and the held-out bits per byte after LAPT, the run the energy the Ray workers measured."""
    from vocadapt.platform.model_loading import strip_custom_code

    recipe, initial_dir = run.recipe, outcome.model_dir
    lapt = continue_pretraining(recipe, initial_dir, recipe.workdir / run.method, run.run_id)
    outcome.model_dir = lapt["model_dir"]
    strip_custom_code(Path(outcome.model_dir))
    outcome.lapt = lapt
    if lapt["energy"]:  # measured in the Ray workers, summed over nodes
        run.account(EnergyReading.from_dict(lapt["energy"]))
    after = {f"{stream}_after_lapt": value for stream, value in lapt["bits_per_byte"].items()}
    outcome.bits_per_byte.update(after)
    recipe.tracker.log_metrics(run.run_id, {f"bpb_{k}": v for k, v in after.items()}, step=lapt["steps"])
    shutil.rmtree(initial_dir, ignore_errors=True)


def _score_final_model(run: MethodRun, outcome: MethodOutcome, final_model, final_tokenizer) -> None:
    """The method's final model on the side-by-side benchmark (when it has items) and its decoding speed-up on
    every target language's held-out text, into ``outcome.side_by_side`` (per-item parts into its gate items)."""
    recipe = run.recipe
    config, side_by_side = recipe.config, recipe.side_by_side
    with run.stage("evaluation"), on_scoring_device(config, final_model, recipe.source_model):
        if side_by_side is not None:
            outcome.side_by_side = score_adapted_model(final_model, final_tokenizer, recipe.source_tokenizer,
                                                        side_by_side, outcome.gate_items)
        for stream, language in language_streams(config)[:-1]:  # every target language's own text
            outcome.side_by_side |= equal_content_speed_up(
                config, (final_model, final_tokenizer), (recipe.source_model, recipe.source_tokenizer),
                recipe.held_out[stream], scope="" if stream == "target" else f"{language}.")


def _register(config, tracker: Tracker, best: MethodOutcome, lineage: dict[str, str], parent_id: str, console):
    """Register the best method's model as ``candidate`` with lineage tags, a sha256 manifest and a model card.

    A model that would not serve (platform/serving/serve_check.py) is not registered: the reasons are printed and logged
    (tag ``vocadapt.not_registered`` on the parent run), the trained models stay in the output folder, and the
    run finishes; None is returned."""
    from vocadapt.platform.model_loading import registered_model_name
    from vocadapt.platform.registry.model_versions import register_model
    from vocadapt.platform.serving.serve_check import NotServableError

    name = config.tracking.registered_model or registered_model_name(config)
    tags = lineage | {
        "vocadapt.method": best.method,
        "vocadapt.parent_run_id": parent_id,
        "vocadapt.config": f"runs:/{parent_id}/config.yaml",
    }
    try:
        registered = register_model(tracker, best.run_id, best.model_dir, name, lineage=tags)  # alias: candidate
    except NotServableError as refusal:
        console.print(f"[bold red]not registered:[/] {refusal}", highlight=False)
        tracker.set_tags(parent_id, {"vocadapt.not_registered": str(refusal)[:4900]})
        return None
    return registered.name, int(registered.version)


def _drop_other_models(outcomes: list[MethodOutcome], best: MethodOutcome) -> None:
    """Keep only the best method's checkpoint on disk; the others' numbers are in MLflow."""
    for outcome in outcomes:
        if outcome is not best:
            shutil.rmtree(outcome.model_dir, ignore_errors=True)
