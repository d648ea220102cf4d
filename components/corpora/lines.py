"""Corpus files given on a command line: one document per line, a missing file named with its flag."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from vocadapt.components.errors import UserError


def read_lines(files: list[Path], max_lines: Optional[int] = None, flag: str = "--corpus") -> list[str]:
    """Non-empty lines of text files (one document per line); a missing file is named with its ``flag``."""
    from vocadapt.components.tokenizers.train import iter_corpus_lines

    require_files(files, flag)
    return list(iter_corpus_lines(files, max_lines))


def require_files(files: list[Path], flag: str) -> None:
    missing = [str(path) for path in files if not Path(path).is_file()]
    if missing:
        raise UserError(f"{flag} {', '.join(missing)}: no such file; pass existing UTF-8 text files, one document "
                        "per line")


__all__ = ["read_lines", "require_files"]
