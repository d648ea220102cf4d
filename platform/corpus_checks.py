"""Step 1 of ``adapt``: check the corpora before any training.

Each file must exist, be non-empty UTF-8 text with at least ``min_lines`` non-blank lines (one document per line),
and fastText's ``lid.176.ftz`` must label at least ``min_share`` of a seeded sample of its lines as the target
language. A failure raises :class:`CorpusCheckError`, which names each file, what failed and the fix, so the run
stops before it writes anything.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vocadapt.components.language_id import fasttext_label, language_shares
from vocadapt.platform.commands._errors import UserError


class CorpusCheckError(UserError):
    """A corpus file failed a check; the message names the file, the check and the fix."""


@dataclass(frozen=True)
class FileReport:
    """What was measured on one corpus file."""

    path: str
    bytes: int
    lines: int  # non-blank lines
    sha256: str
    sampled_lines: int
    language_share: float  # share of sampled lines labelled as the expected language
    top_labels: dict[str, float]  # the five most frequent labels in the sample and their shares
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class CorpusReport:
    """The checks on a set of files for one language; ``passed`` when no file has a problem."""

    language: str
    expected_label: str
    min_share: float
    min_lines: int
    files: list[FileReport]

    @property
    def passed(self) -> bool:
        return not any(report.problems for report in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed}


def check_corpus(
    files: Sequence[Path | str] | Path | str,
    language: str,
    min_share: float = 0.8,
    min_lines: int = 100,
    sample_lines: int = 2000,
    seed: int = 0,
) -> CorpusReport:
    """Check each file; return the report, or raise CorpusCheckError listing every file that failed."""
    paths = [Path(files)] if isinstance(files, (str, Path)) else [Path(f) for f in files]
    if not paths:
        raise CorpusCheckError(f"no corpus files given for {language}: list at least one text file")
    expected = fasttext_label(language)
    reports = [_check_file(path, expected, min_share, min_lines, sample_lines, seed) for path in paths]
    report = CorpusReport(language, expected, min_share, min_lines, reports)
    if not report.passed:
        failures = "; ".join(f"{r.path}: {' and '.join(r.problems)}" for r in report.files if r.problems)
        raise CorpusCheckError(f"corpus check failed for language {language!r}: {failures}")
    return report


def _check_file(path: Path, expected: str, min_share: float, min_lines: int, sample_lines: int, seed: int) -> FileReport:
    if not path.exists():
        return _failed(path, "the file does not exist (fix the path in corpus.* of the config)")
    if not path.is_file():
        return _failed(path, "it is not a regular file (give a text file, one document per line)")
    raw = path.read_bytes()
    if not raw.strip():
        return _failed(path, "the file is empty (give a text file with one document per line)", raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        return _failed(path, f"it is not UTF-8 (byte {error.start}, line {line}; re-encode it, e.g. `iconv -t UTF-8`)", raw)
    lines = [line for line in text.splitlines() if line.strip()]
    problems = []
    if len(lines) < min_lines:
        problems.append(f"it has {len(lines)} non-blank lines, fewer than the {min_lines} required (add text or lower corpus.min_lines)")
    sample = random.Random(seed).sample(lines, min(sample_lines, len(lines)))
    shares = language_shares(sample)
    share = shares.get(expected, 0.0)
    if share < min_share:
        found = ", ".join(f"{label} {value:.0%}" for label, value in list(shares.items())[:3])
        problems.append(
            f"only {share:.1%} of {len(sample)} sampled lines are in {expected} (found {found}), below "
            f"{min_share:.0%}: give {expected} text, or set target.language to the corpus's language"
        )
    top = {label: round(value, 4) for label, value in list(shares.items())[:5]}
    return FileReport(str(path), len(raw), len(lines), _sha256(raw), len(sample), round(share, 4), top, problems)


def _failed(path: Path, problem: str, raw: bytes = b"") -> FileReport:
    return FileReport(str(path), len(raw), 0, _sha256(raw), 0, 0.0, {}, [problem])


def _sha256(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()
