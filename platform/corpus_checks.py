"""Step 1 of ``adapt``: check the corpora before any training.

Each file must exist, be non-empty UTF-8 text with at least ``min_lines`` non-blank lines (one document per line),
and fastText's ``lid.176.ftz`` must label at least ``min_share`` of a seeded sample of its lines as the target
language. A failure raises :class:`CorpusCheckError`, which names each file, what failed and the fix, so the run
stops before it writes anything.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vocadapt.components.language_id import fasttext_label, identify_languages, language_shares
from vocadapt.components.errors import UserError


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


def _check_file(
    path: Path, expected: str, min_share: float, min_lines: int, sample_lines: int, seed: int
) -> FileReport:
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
        problem = f"it is not UTF-8 (byte {error.start}, line {line}; re-encode it, e.g. `iconv -t UTF-8`)"
        return _failed(path, problem, raw)
    lines = [line for line in text.splitlines() if line.strip()]
    problems = []
    if len(lines) < min_lines:
        problems.append(
            f"it has {len(lines)} non-blank lines, fewer than the {min_lines} required "
            "(add text or lower corpus.min_lines)"
        )
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


# --- the same checks as a great-expectations suite, one validation per split ---------------------------------


def expectation_suite_results(
    files_by_split: Mapping[str, Sequence[Path | str]],
    language: str,
    min_share: float = 0.8,
    min_lines: int = 100,
    max_chars: int = 20_000,
    max_duplicate_share: float = 0.2,
) -> dict[str, Any]:
    """Validate each split's lines with a great-expectations 1.x suite; a JSON-ready result to save with the run.

    One row per non-blank line: ``text``, ``utf8`` (the line decoded without error) and ``language`` (lid.176's
    label). Expectations: at least ``min_lines`` rows (non-empty), every line UTF-8, line lengths in
    [1, ``max_chars``], at most ``max_duplicate_share`` repeated lines, and at least ``min_share`` of lines labelled
    as the language. Returns ``{"language", "success", "failures": [...], "splits": {split: GX result dict}}``.
    """
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")  # no usage reports from an offline machine
    import great_expectations as gx
    import great_expectations.expectations as gxe

    from great_expectations.data_context.types.base import ProgressBarsConfig

    expected = fasttext_label(language)
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    batch = context.data_sources.add_pandas("corpus").add_dataframe_asset("lines")
    batch = batch.add_batch_definition_whole_dataframe("whole-split")
    suite = context.suites.add(gx.ExpectationSuite(name=f"corpus-{language}"))
    for expectation in (
        gxe.ExpectTableRowCountToBeBetween(min_value=min_lines),
        gxe.ExpectColumnValuesToBeInSet(column="utf8", value_set=[True]),
        gxe.ExpectColumnValueLengthsToBeBetween(column="text", min_value=1, max_value=max_chars),
        gxe.ExpectColumnProportionOfUniqueValuesToBeBetween(column="text", min_value=1.0 - max_duplicate_share),
        gxe.ExpectColumnValuesToBeInSet(column="language", value_set=[expected], mostly=min_share),
    ):
        suite.add_expectation(expectation)
    validation = context.validation_definitions.add(
        gx.ValidationDefinition(name=f"corpus-{language}-splits", data=batch, suite=suite)
    )
    results, failures = {}, []
    for split, files in files_by_split.items():
        result = validation.run(batch_parameters={"dataframe": _lines_frame(files)}).to_json_dict()
        results[split] = result
        failures += [f"{split}: {_expectation_name(o)}" for o in result["results"] if not o["success"]]
    summary = {"language": language, "expected_label": expected, "success": not failures, "failures": failures}
    return {**summary, "splits": results}


def _expectation_name(outcome: dict[str, Any]) -> str:
    """``expect_column_values_to_be_in_set on language``: the expectation's type and the column it looks at."""
    config = outcome["expectation_config"]
    column = config["kwargs"].get("column")
    return f"{config['type']} on {column}" if column else config["type"]


def _lines_frame(files: Sequence[Path | str]):
    """One row per non-blank line of the files: text, whether it decoded as UTF-8, its lid.176 label."""
    import pandas as pd

    texts, valid = [], []
    for file in files:
        path = Path(file)
        if not path.is_file():
            continue
        for raw in path.read_bytes().splitlines():
            if not raw.strip():
                continue
            try:
                texts.append(raw.decode("utf-8"))
                valid.append(True)
            except UnicodeDecodeError:
                texts.append(raw.decode("utf-8", errors="replace"))
                valid.append(False)
    labels = identify_languages(texts)
    return pd.DataFrame({"text": texts, "utf8": valid, "language": labels}, columns=["text", "utf8", "language"])
