"""Resolve what a config names into files: the source model and the corpora (embedded default or the user's).

Everything here runs before any work starts, so a missing corpus or unbuilt assets fail with a clear message and
leave nothing behind.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from vocadapt.components.errors import UserError
from vocadapt.platform.config import EMBEDDED_MODEL, ExperimentConfig


@dataclass(frozen=True)
class ResolvedInputs:
    """Files an adaptation reads. Target = the language adapted to; source = the model's own language."""

    source_model: str
    target_train: tuple[Path, ...]
    target_validation: tuple[Path, ...]
    source_train: tuple[Path, ...]
    source_validation: tuple[Path, ...]
    embedded: bool
    source_lexicon: Path | None = None  # a source-language word list protected by vocabulary expansion
    target_tokenizer: str | None = None  # tokenizer.pretrained: a folder or hub name used instead of training one
    # target.languages after the first: language -> (training files, held-out files); target_* are the first's
    further_languages: dict[str, tuple[tuple[Path, ...], tuple[Path, ...]]] = field(default_factory=dict)

    @property
    def corpus_files(self) -> tuple[Path, ...]:
        """Every corpus file whose bytes define the experiment (for the corpus sha256)."""
        further = tuple(path for train, validation in self.further_languages.values() for path in train + validation)
        return self.target_train + self.target_validation + self.source_train + self.source_validation + further

    def target_train_by_language(self, primary: str) -> dict[str, tuple[Path, ...]]:
        """Training files per target language, the first (``primary``, the config's target.language) first."""
        return {primary: self.target_train, **{language: train for language, (train, _) in
                                               self.further_languages.items()}}  # fmt: skip

    def target_validation_by_language(self, primary: str) -> dict[str, tuple[Path, ...]]:
        """Held-out files per target language, the first (``primary``) first."""
        return {primary: self.target_validation, **{language: validation for language, (_, validation) in
                                                    self.further_languages.items()}}  # fmt: skip


def resolve_inputs(config: ExperimentConfig) -> ResolvedInputs:
    """Locate the model and corpora; raise UserError naming what is missing and how to get it."""
    needs_assets = config.source.model == EMBEDDED_MODEL or config.corpus.train == "embedded"
    assets = _embedded_assets(config) if needs_assets else None
    source_model = str(assets.model_dir) if config.source.model == EMBEDDED_MODEL else config.source.model
    if _looks_like_path(source_model) and not Path(source_model).is_dir():
        raise UserError(
            f"source.model {source_model!r} is not a directory; give a saved model directory, a hub name, "
            f"or {EMBEDDED_MODEL!r}"
        )
    if config.source.model != EMBEDDED_MODEL:  # a hub id becomes its snapshot folder (the hub cache, or fetched)
        from vocadapt.platform.model_loading import resolve_model_folder

        source_model = resolve_model_folder(source_model, what="source.model", revision=config.source.revision)
    if config.corpus.train == "embedded":
        target, source = config.target.language, config.target.source_language
        target_train = (assets.corpus(target, "train"),)
        target_validation = (assets.corpus(target, "validation"),)
        source_train = (assets.corpus(source, "train"),)
        source_validation = (assets.corpus(source, "validation"),)
    else:
        target_train = _existing("corpus.train", config.corpus.train)
        target_validation = _existing("corpus.validation", config.corpus.validation or [])
        source_train = _existing("corpus.source_language_train", config.corpus.source_language_train or [])
        source_validation = _existing(
            "corpus.source_language_validation", config.corpus.source_language_validation or []
        )
    pretrained = config.tokenizer.pretrained
    if pretrained and _looks_like_path(pretrained):
        if not Path(pretrained).expanduser().is_dir():
            raise UserError(f"tokenizer.pretrained {pretrained!r} is not a directory; give a folder with tokenizer "
                            "files (tokenizer.json or tokenizer.model), a hub name, or null to train one")  # fmt: skip
        pretrained = str(Path(pretrained).expanduser())
    further = {}
    for language in config.target.languages[1:]:  # several target languages: the first's are target_*
        if config.corpus.train == "embedded":
            further[language] = ((assets.corpus(language, "train"),), (assets.corpus(language, "validation"),))
        else:
            files = config.corpus.languages[language]
            further[language] = (_existing(f"corpus.languages.{language}.train", files.train),
                                 _existing(f"corpus.languages.{language}.validation", files.validation))
    return ResolvedInputs(
        source_model, target_train, target_validation, source_train, source_validation, assets is not None,
        _source_lexicon(config, assets), pretrained, further,
    )


def _source_lexicon(config: ExperimentConfig, assets) -> Path | None:
    """The word list named by ``tokenizer.protect_lexicon`` (only read when expanding)."""
    if config.init.mode != "expand":
        return None
    return word_list_path(config.tokenizer.protect_lexicon, config.target.source_language,
                          "tokenizer.protect_lexicon", assets)


def word_list_path(named: str | None, language: str, field: str, assets=None) -> Path | None:
    """A protected word list: None for none; 'embedded' for the one `vocadapt assets` built for ``language`` (None
    where none was built); else a file, which must exist (a UserError naming ``field`` otherwise)."""
    if named is None:
        return None
    if named != "embedded":
        path = Path(named).expanduser()
        if not path.is_file():
            raise UserError(f"{field}: word list {path} does not exist; fix the path, use 'embedded' (built by "
                            "`vocadapt assets`), or null for none")  # fmt: skip
        return path
    if assets is None:
        from vocadapt.platform.assets.embedded import AssetsNotBuilt, load_assets

        try:
            assets = load_assets(languages=())
        except AssetsNotBuilt:
            return None
    return assets.lexicon(language)


def _embedded_assets(config: ExperimentConfig):
    from vocadapt.platform.assets.embedded import load_assets

    languages = tuple(dict.fromkeys([*config.target.languages, config.target.source_language]))
    try:
        return load_assets(languages=languages)
    except FileNotFoundError as error:
        raise UserError(f"{error}") from error


def _existing(field: str, names: list[str]) -> tuple[Path, ...]:
    paths = []
    for name in names:
        path = Path(name).expanduser()
        if not path.is_file():
            raise UserError(f"{field}: corpus file {path} does not exist; fix the path or run `vocadapt assets`")
        paths.append(path)
    return tuple(paths)


def _looks_like_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or os.sep in name and Path(name).exists() or Path(name).is_dir()


def read_documents(paths: tuple[Path, ...], limit: int | None = None) -> list[str]:
    """The first ``limit`` non-empty lines (one document per line) across ``paths``, in order."""
    documents: list[str] = []
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                line = line.rstrip("\n")
                if line.strip():
                    documents.append(line)
                    if limit is not None and len(documents) >= limit:
                        return documents
    return documents
