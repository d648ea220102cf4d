"""The ``trim`` pipeline: cut a model's vocabulary to what some languages' text uses, with no training.

Checks first (the model folder, the output folder, the corpora of every language), then the trimmed tokenizer and
the copied embedding and head rows (``components/surgery/trim.py``), written whole or not at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vocadapt.components.errors import UserError
from vocadapt.platform.assets.sources import read_documents


def trim_corpora(languages: Sequence[str], corpus_files: Sequence[Path]) -> tuple[Path, ...]:
    """The text a trim keeps tokens for: each language's embedded training corpus, plus ``corpus_files``."""
    for path in corpus_files:
        if not Path(path).is_file():
            raise UserError(f"--corpus {path} does not exist; give an existing text file (one document per line)")
    if not languages and not corpus_files:
        raise UserError("no text to trim to: give --language CODE (the embedded corpora; repeatable) or --corpus FILE")
    found = []
    if languages:
        from vocadapt.platform.assets.embedded import load_assets

        assets = load_assets(languages=tuple(languages))  # refuses a language whose corpus is not built
        found = [assets.corpus(language, "train") for language in languages]
    return tuple(found) + tuple(Path(path) for path in corpus_files)


@dataclass(frozen=True)
class KeepRule:
    """Which tokens a trim keeps: those seen at least ``min_count`` times, or the ``size`` most frequent; neither
    given, the trim's default threshold."""

    min_count: int | None = None
    size: int | None = None

    def check(self) -> None:
        if self.min_count is not None and self.size is not None:
            raise UserError("give a frequency threshold (--min-count) or a target size (--size), not both")
        for value, flag in ((self.min_count, "--min-count"), (self.size, "--size")):
            if value is not None and value < 1:
                raise UserError(f"{flag} must be at least 1, got {value}")


def run_trim(model: str, out: Path, *, languages: Sequence[str] = (), corpus_files: Sequence[Path] = (),
             keep: KeepRule = KeepRule(), overwrite: bool = False) -> dict[str, Any]:
    """Trim ``model`` (a folder, a hub id in the cache, or the embedded default's name) into ``out``, keeping the
    tokens ``keep`` chooses in the languages' text; returns the record written there (``vocadapt_init.json``)."""
    from vocadapt.components.surgery.trim import trim_checkpoint
    from vocadapt.platform.config import EMBEDDED_MODEL
    from vocadapt.platform.model_loading import check_model_folder, resolve_model_folder

    keep.check()
    if out.exists() and not overwrite:
        raise UserError(f"--out {out} already exists; choose another --out or pass --overwrite")
    if model == EMBEDDED_MODEL:
        from vocadapt.platform.assets.embedded import load_assets

        folder = load_assets().model_dir
    else:
        folder = Path(resolve_model_folder(model, what="MODEL"))
        if not folder.exists():
            raise UserError(f"MODEL {model} does not exist; give a model folder, a cached hub id or {EMBEDDED_MODEL}")
    check_model_folder(folder, what="MODEL")  # safetensors only, no custom code
    if Path(out).resolve() == folder.resolve():
        raise UserError(f"--out {out} is the model folder itself; give another folder")
    corpora = trim_corpora(languages, corpus_files)
    from vocadapt.components.surgery.checkpoint import CheckpointWriting

    extra = {"corpora": [str(path) for path in corpora], "languages": list(languages)}
    return trim_checkpoint(folder, read_documents(corpora), out, min_count=keep.min_count, size=keep.size,
                           writing=CheckpointWriting(overwrite=overwrite, record_extra=extra))
