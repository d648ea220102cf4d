"""The steps ``vocadapt adapt`` and ``vocadapt leaderboard`` share: measure a stage's energy, train (or take) the
target tokenizer and replace or expand the source vocabulary with it, score held-out bits per byte, build the helper.
Each is a plain function of the config and the resolved inputs; the pipelines around them own the runs, the tracking
and the output folder (``pipelines/recipe.py`` holds what they share, and initialises one method's rows)."""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from pathlib import Path

from vocadapt.components.tokenizers.saving import save_tokenizer
from vocadapt.platform.config import ExperimentConfig
from vocadapt.platform.energy import measure_energy
from vocadapt.platform.assets.sources import ResolvedInputs, read_documents


def measure_stage(config: ExperimentConfig, stage: str):
    """Energy and CO2 of one stage on the configured grid; nothing is measured with ``tracking.energy`` off."""
    return measure_energy(stage, country_iso_code=config.tracking.country_iso_code, enabled=config.tracking.energy)


def train_target_tokenizer(config, inputs, source_tokenizer, workdir: Path, cache=None, pretrained=None):
    """Train the target tokenizer (or take ``pretrained``, ``tokenizer.pretrained`` loaded), then replace the source
    vocabulary with it or expand the source with it.

    Returns (adapted tokenizer, what changed: ``.target_to_source`` and ``.new_token_ids``, saved folder)."""
    from vocadapt.components.tokenizers.language_settings import tokenizer_settings_for
    from vocadapt.components.tokenizers.train import TokenizerTrainingSpec, train_tokenizer

    if config.init.mode == "trim":
        return trim_source_tokenizer(config, inputs, source_tokenizer, workdir)
    if config.target.multilingual:
        return several_languages_tokenizer(config, inputs, source_tokenizer, workdir)
    settings = tokenizer_settings_for(config.target.language, config.tokenizer.kind)

    def train(out_dir: Path):
        spec = TokenizerTrainingSpec(
            vocab_size=config.tokenizer.vocab_size, min_frequency=config.tokenizer.min_frequency,
            max_lines=config.tokenizer.max_training_lines, seed=config.seed, like=source_tokenizer, **settings,
        )
        return train_tokenizer(list(inputs.target_train), spec, out_dir)

    if pretrained is not None:
        trained = pretrained
    elif cache is None:
        trained = train(workdir / "tokenizer-trained")
    else:
        trained = cache.trained_tokenizer(config, inputs, train)
    if config.init.mode == "replace":
        from vocadapt.components.tokenizers.replace import replace_vocabulary

        change = replace_vocabulary(source_tokenizer, trained)
    else:
        change = expand_vocabulary(config, inputs, source_tokenizer, trained)
    tokenizer_dir = workdir / "tokenizer"
    save_tokenizer(change.tokenizer, tokenizer_dir)
    shutil.rmtree(workdir / "tokenizer-trained", ignore_errors=True)
    return change.tokenizer, change, tokenizer_dir


def several_languages_tokenizer(config, inputs, source_tokenizer, workdir: Path):
    """target.languages: replacement trains one tokenizer on a balanced mix of every language's training text
    (``mix.balanced_mix``: the same number of lines from each, up to tokenizer.max_training_lines in all);
    expansion trains one tokenizer per language and adds tokenizer.expand_top_k new tokens (None: every candidate)
    split across the languages by tokenizer.budget_rule (``multilingual.expand_for_languages``), protecting the
    source language as a one-language expansion does."""
    from vocadapt.components.tokenizers.train import (
        TokenizerTrainingSpec, train_tokenizer, train_tokenizer_from_iterator)

    languages = config.target.languages
    files = inputs.target_train_by_language(config.target.language)
    common = dict(vocab_size=config.tokenizer.vocab_size, min_frequency=config.tokenizer.min_frequency,
                  seed=config.seed, like=source_tokenizer)
    if config.init.mode == "replace":
        from vocadapt.components.tokenizers.mix import balanced_mix
        from vocadapt.components.tokenizers.replace import replace_vocabulary

        lines = balanced_mix({language: read_documents(files[language], None) for language in languages},
                             config.tokenizer.max_training_lines, config.seed)  # fmt: skip
        spec = TokenizerTrainingSpec(**_mixed_settings(languages, config.tokenizer.kind), **common)
        trained = train_tokenizer_from_iterator(lines, spec, workdir / "tokenizer-trained",
                                                corpus_name=f"the {'+'.join(languages)} mix")
        change = replace_vocabulary(source_tokenizer, trained)
    else:
        from vocadapt.components.tokenizers.expand import protected_source_text
        from vocadapt.components.tokenizers.language_settings import tokenizer_settings_for
        from vocadapt.components.tokenizers.multilingual import count_candidates, expand_for_languages

        specs = {language: TokenizerTrainingSpec(max_lines=config.tokenizer.max_training_lines,
                                                 **tokenizer_settings_for(language, config.tokenizer.kind), **common)
                 for language in languages}  # fmt: skip
        auxiliary = {language: train_tokenizer(list(files[language]), specs[language],
                                               workdir / "tokenizer-trained" / language) for language in languages}
        documents = {language: read_documents(files[language], config.tokenizer.max_training_lines)
                     for language in languages}  # fmt: skip
        protect = read_documents(inputs.source_train, config.tokenizer.protect_lines) if inputs.source_train else []
        lexicon = inputs.source_lexicon.read_text(encoding="utf-8").split() if inputs.source_lexicon else None
        guard = protected_source_text(source_tokenizer, protect, lexicon) if protect or lexicon else None
        candidates = count_candidates(source_tokenizer, auxiliary, documents)
        change = expand_for_languages(source_tokenizer, candidates, config.tokenizer.expand_top_k,
                                      rule=config.tokenizer.budget_rule, protect=guard)
    tokenizer_dir = workdir / "tokenizer"
    save_tokenizer(change.tokenizer, tokenizer_dir)
    shutil.rmtree(workdir / "tokenizer-trained", ignore_errors=True)
    return change.tokenizer, change, tokenizer_dir


def _mixed_settings(languages, kind: str) -> dict:
    """One tokenizer for several scripts: a sentencepiece kind where any language needs one (spaceless scripts,
    abugidas), with the lowest character coverage any of them asks for (a large alphabet's); else byte-level BPE."""
    from vocadapt.components.tokenizers.language_settings import tokenizer_settings_for

    settings = [tokenizer_settings_for(language, kind) for language in languages]
    spm = [entry for entry in settings if entry["kind"].startswith("spm")]
    if not spm:
        return settings[0]
    chosen = dict(spm[0])
    coverages = [entry["character_coverage"] for entry in spm if entry.get("character_coverage") is not None]
    if coverages:
        chosen["character_coverage"] = min(coverages)
    return chosen


def trim_source_tokenizer(config, inputs, source_tokenizer, workdir: Path):
    """init.mode trim: the source tokenizer cut to the tokens the target- and source-language training text uses
    (nothing is trained; every kept token keeps its source row)."""
    from vocadapt.components.tokenizers.trim import trim_tokenizer

    further = tuple(path for train, _ in inputs.further_languages.values() for path in train)
    documents = read_documents(tuple(inputs.target_train) + further + tuple(inputs.source_train or ()),
                               config.tokenizer.max_training_lines)
    change = trim_tokenizer(source_tokenizer, documents, min_count=config.tokenizer.trim_min_count,
                            size=config.tokenizer.trim_size)
    tokenizer_dir = workdir / "tokenizer"
    save_tokenizer(change.tokenizer, tokenizer_dir)
    return change.tokenizer, change, tokenizer_dir


def expand_vocabulary(config, inputs, source_tokenizer, trained):
    from vocadapt.components.tokenizers.expand import expand_with_target, expand_with_top_k

    protect = read_documents(inputs.source_train, config.tokenizer.protect_lines) if inputs.source_train else None
    lexicon = inputs.source_lexicon.read_text(encoding="utf-8").split() if inputs.source_lexicon else None
    if config.tokenizer.expand_top_k is None:
        return expand_with_target(source_tokenizer, trained, protect=protect, protect_words=lexicon)
    documents = read_documents(inputs.target_train, config.tokenizer.max_training_lines)
    return expand_with_top_k(source_tokenizer, trained, documents, config.tokenizer.expand_top_k, protect=protect,
                             protect_words=lexicon)  # fmt: skip


def scoring_device(config: ExperimentConfig) -> str:
    """``evaluation.device`` resolved: ``cuda`` (the first CUDA device) or ``cpu``."""
    import torch

    if config.evaluation.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return config.evaluation.device


@contextmanager
def on_scoring_device(config: ExperimentConfig, *models):
    """The models on ``evaluation.device`` while the block scores them, back on the CPU after it (nothing moves
    when that is the CPU). The scoring code sends its inputs to each model's own device. Nested blocks are safe:
    a model already there is left where it is, and the block that moved it moves it back."""
    device = scoring_device(config)
    moved = [model for model in models if getattr(getattr(model, "device", None), "type", None) != device]
    if device == "cpu" or not moved:
        yield
        return
    import torch

    for model in moved:
        model.to(device)
    try:
        yield
    finally:
        for model in moved:
            model.to("cpu")
        torch.cuda.empty_cache()


def held_out_bits_per_byte(model, tokenizer, held_out, config: ExperimentConfig) -> dict[str, float]:
    """Bits per byte of every held-out stream, the model on ``evaluation.device`` meanwhile."""
    from vocadapt.components.metrics.bits_per_byte import bits_per_byte

    with on_scoring_device(config, model):
        return {
            stream: bits_per_byte(model, tokenizer, documents, max_length=config.evaluation.max_length,
                                  batch_size=config.evaluation.batch_size)
            for stream, documents in held_out.items()
        }


def build_helper(config: ExperimentConfig, target_tokenizer, inputs: ResolvedInputs):
    """The helper the config names (e.g. fastText trained on the target-tokenized corpus), built once per run; the
    run asks for it only when a listed method uses one."""
    from vocadapt.components.helpers import resolve_helper

    return resolve_helper(
        config.init.helper, target_tokenizer=target_tokenizer, corpus_files=list(inputs.target_train),
        seed=config.seed,
    )


def language_streams(config: ExperimentConfig) -> list[tuple[str, str]]:
    """(held-out stream, language) of every language a run measures: ``target`` (the first target language), a
    ``target_<code>`` stream for each further one of target.languages, and ``source``. Metrics name the stream
    (``bpb_target_de_zero_shot``) or the language (``fertility.target_tokenizer.de.tokens_per_word``)."""
    from vocadapt.components.training.settings import language_stream

    primary = config.target.language
    further = [(language_stream(language, primary), language) for language in config.target.languages[1:]]
    return [("target", primary), *further, ("source", config.target.source_language)]


def further_held_out(config: ExperimentConfig, inputs: ResolvedInputs) -> dict[str, list[str]]:
    """Held-out documents of target.languages after the first, per ``target_<code>`` stream ({} for one language)."""
    from vocadapt.components.training.settings import language_stream

    return {language_stream(language, config.target.language): read_documents(validation,
                                                                               config.evaluation.max_documents)
            for language, (_, validation) in inputs.further_languages.items()}  # fmt: skip


def lapt_language_files(config: ExperimentConfig, inputs: ResolvedInputs) -> dict[str, list[str]] | None:
    """LAPT files per stream with several target languages: ``target`` (the first), ``target_<code>`` for each
    further one (lapt.mixing shares them), ``source``; None with one language or where lapt.train_files is set."""
    from vocadapt.components.training.settings import language_stream

    if not inputs.further_languages or config.lapt.train_files is not None:
        return None
    files = {"target": [str(path) for path in inputs.target_train]}
    for language, (train, _) in inputs.further_languages.items():
        files[language_stream(language, config.target.language)] = [str(path) for path in train]
    return files | {"source": [str(path) for path in inputs.source_train]}
