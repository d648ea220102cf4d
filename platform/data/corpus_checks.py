"""Step 1 of ``adapt``: check the corpora before any training.

Each file must exist, be non-empty UTF-8 text with at least ``min_lines`` non-blank lines (one document per line),
and fastText's ``lid.176.ftz`` must label at least ``min_share`` of a seeded sample of its lines as the target
language. A failure raises :class:`CorpusCheckError`, which names each file, what failed and the fix, so the run
stops before it writes anything.

The same corpora then go through a great-expectations suite (:func:`run_expectation_suite`: line count, UTF-8, line
lengths, repeated lines, language share), whose records and counts the pipelines log with the run
(``corpus_checks/expectations.json`` and ``corpus.expectations_*``); a failed expectation raises
:class:`CorpusExpectationError` naming it and the fix, also before anything is written.
"""

from __future__ import annotations

import hashlib
import os
import random
import time
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


@dataclass(frozen=True)
class CorpusSplit:
    """One corpus the suite validates: its role in the run (``target training``), files, language, least lines."""

    name: str
    files: tuple[Path, ...]
    language: str
    min_lines: int = 1


class CorpusExpectationError(CorpusCheckError):
    """A corpus failed an expectation of the suite; the message names the corpus, the expectation and the fix."""


EXPECTATIONS_ARTIFACT = "corpus_checks/expectations.json"  # where a run keeps the suite's records

# The settings a failed expectation's fix names, by default the `corpus` and `target` sections of an adapt config.
CONFIG_FIELDS = {
    "min_lines": "corpus.min_lines", "max_line_chars": "corpus.max_line_chars",
    "max_duplicate_share": "corpus.max_duplicate_share", "min_language_share": "corpus.min_language_share",
    "language": "target.language",
}


@dataclass(frozen=True)
class LineBounds:
    """What every split's lines must meet: at least ``min_share`` of them labelled as the split's language, at most
    ``max_chars`` characters each, at most ``max_duplicate_share`` of them repeated."""

    min_share: float = 0.8
    max_chars: int = 20_000
    max_duplicate_share: float = 0.2


def run_expectation_suite(
    splits: Sequence[CorpusSplit],
    bounds: LineBounds = LineBounds(),
    *,
    max_rows: int | None = None,
    seed: int = 0,
    raw: bool = False,
) -> dict[str, Any]:
    """Validate each split's lines with one great-expectations 1.x suite; a JSON-ready result to save with the run.

    One row per non-blank line: ``text``, ``utf8`` (the line decoded without error) and ``language`` (lid.176's
    label). Expectations: at least the split's ``min_lines`` rows, every line UTF-8, line lengths in [1,
    ``max_chars``], at most ``max_duplicate_share`` repeated lines, and at least ``min_share`` of lines labelled as
    the split's language. A split with more than ``max_rows`` lines is validated on a seeded sample of that many
    (never fewer than its ``min_lines``); its line count is still the whole file's.

    Returns ``{"success", "failures": ["<split>: <expectation>"], "expectations": [one record per split and
    expectation: corpus, language, expectation, measure, observed, threshold, success], "corpora": {split: files,
    language, lines, rows_validated}, "seconds"}``, and ``"splits"``: {split: GX result dict} when ``raw``.
    """
    started = time.perf_counter()
    min_share, max_chars, max_duplicate_share = bounds.min_share, bounds.max_chars, bounds.max_duplicate_share
    validation = _corpus_validation(min_share, max_chars, max_duplicate_share)
    records, corpora, raw_results = [], {}, {}
    for split in splits:
        frame, lines = _lines_frame(split.files, max_rows and max(max_rows, split.min_lines), seed)
        parameters = {"min_lines": split.min_lines, "labels": [fasttext_label(split.language)]}
        result = validation.run(batch_parameters={"dataframe": frame}, expectation_parameters=parameters)
        result = result.to_json_dict()
        raw_results[split.name] = result
        corpora[split.name] = {"files": [str(f) for f in split.files], "language": split.language, "lines": lines,
                               "rows_validated": len(frame)}
        records += [_record(split, outcome, lines) for outcome in result["results"]]
    failures = [f"{r['corpus']}: {r['expectation']}" for r in records if not r["success"]]
    results = {"success": not failures, "failures": failures, "expectations": records, "corpora": corpora,
               "seconds": round(time.perf_counter() - started, 3)}
    return {**results, "splits": raw_results} if raw else results


def expectation_suite_results(
    files_by_split: Mapping[str, Sequence[Path | str]],
    language: str,
    min_share: float = 0.8,
    min_lines: int = 100,
    max_chars: int = 20_000,
    max_duplicate_share: float = 0.2,
) -> dict[str, Any]:
    """:func:`run_expectation_suite` on splits of one language, with each split's GX result under ``"splits"``."""
    splits = [CorpusSplit(name, tuple(Path(f) for f in files), language, min_lines)
              for name, files in files_by_split.items()]
    results = run_expectation_suite(splits, LineBounds(min_share, max_chars, max_duplicate_share), raw=True)
    return {"language": language, "expected_label": fasttext_label(language), **results}


def raise_for_failed_expectations(results: Mapping[str, Any], fields: Mapping[str, str] = CONFIG_FIELDS) -> None:
    """Raise :class:`CorpusExpectationError` naming every failed expectation, what was measured and the fix.

    ``fields``: the settings the fixes name (:data:`CONFIG_FIELDS` for an adapt config).
    """
    failed = [record for record in results["expectations"] if not record["success"]]
    if not failed:
        return
    problems = []
    for record in failed:
        files = ", ".join(results["corpora"][record["corpus"]]["files"])
        problems.append(f"{record['corpus']} ({files}): {record['expectation']}: {record['measure']} is "
                        f"{record['observed']}, needs {record['threshold']}; {_fix(record, fields)}")
    raise CorpusExpectationError("corpus expectation failed: " + "; ".join(problems))


def expectation_metrics(results: Mapping[str, Any]) -> dict[str, float]:
    """Counts to log with the run: evaluated and passed expectations, in all and per corpus, and the seconds."""
    records = results["expectations"]
    metrics = {"corpus.expectations_evaluated": len(records),
               "corpus.expectations_passed": sum(r["success"] for r in records),
               "corpus.expectations_seconds": results.get("seconds", 0.0)}
    for name in results["corpora"]:
        own = [r for r in records if r["corpus"] == name]
        metrics[f"corpus.{name.replace(' ', '_')}.expectations_passed"] = sum(r["success"] for r in own)
    return metrics


def expectations_artifact(results: Mapping[str, Any]) -> dict[str, Any]:
    """What ``corpus_checks/expectations.json`` holds: the summary, one record per corpus and expectation, the
    corpora (files, lines, rows validated); not the raw GX results."""
    return {key: results[key] for key in ("success", "failures", "expectations", "corpora", "seconds")}


def log_expectations(tracker, run_id: str, results: Mapping[str, Any]) -> None:
    """Save the results with a run (a ``platform.tracking.Tracker``'s): the records as
    ``corpus_checks/expectations.json``, the counts as ``corpus.expectations_*`` metrics."""
    tracker.log_dict(run_id, expectations_artifact(results), EXPECTATIONS_ARTIFACT)
    tracker.log_metrics(run_id, expectation_metrics(results))


def _corpus_validation(min_share: float, max_chars: int, max_duplicate_share: float):
    """The suite on an in-memory dataframe; ``min_lines`` and ``labels`` are set per split when it runs."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")  # no usage reports from an offline machine
    import great_expectations as gx
    import great_expectations.expectations as gxe

    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    batch = context.data_sources.add_pandas("corpus").add_dataframe_asset("lines")
    batch = batch.add_batch_definition_whole_dataframe("whole-split")
    suite = context.suites.add(gx.ExpectationSuite(name="corpus"))
    for expectation in (
        gxe.ExpectTableRowCountToBeBetween(min_value={"$PARAMETER": "min_lines"}),
        gxe.ExpectColumnValuesToBeInSet(column="utf8", value_set=[True]),
        gxe.ExpectColumnValueLengthsToBeBetween(column="text", min_value=1, max_value=max_chars),
        gxe.ExpectColumnProportionOfUniqueValuesToBeBetween(column="text", min_value=1.0 - max_duplicate_share),
        gxe.ExpectColumnValuesToBeInSet(column="language", value_set={"$PARAMETER": "labels"}, mostly=min_share),
    ):
        suite.add_expectation(expectation)
    return context.validation_definitions.add(gx.ValidationDefinition(name="corpus-splits", data=batch, suite=suite))


def _expectation_name(outcome: dict[str, Any]) -> str:
    """``expect_column_values_to_be_in_set on language``: the expectation's type and the column it looks at."""
    config = outcome["expectation_config"]
    column = config["kwargs"].get("column")
    return f"{config['type']} on {column}" if column else config["type"]


def _record(split: CorpusSplit, outcome: dict[str, Any], lines: int) -> dict[str, Any]:
    """One expectation's outcome on one split: what it measures, the value observed and the bound it needs."""
    config, result = outcome["expectation_config"], outcome.get("result") or {}
    kwargs, column = config["kwargs"], config["kwargs"].get("column")
    if column is None:  # the row count: the whole file's lines, also where a sample was validated
        measure, observed, threshold = "non-blank lines", lines, f">= {kwargs['min_value']}"
    elif "observed_value" in result:  # the share of distinct lines
        measure, observed, threshold = "share of distinct lines", result["observed_value"], f">= {kwargs['min_value']}"
    else:  # values in a set, lengths in a range: the share of lines that meet it, against `mostly`
        observed = 1.0 - (result.get("unexpected_percent") or 0.0) / 100
        if column == "language":
            measure = f"share of lines labelled {', '.join(map(str, kwargs.get('value_set') or []))}"
        elif column == "utf8":
            measure = "share of lines in UTF-8"
        else:
            measure = f"share of lines of 1 to {kwargs.get('max_value')} characters"
        threshold = f">= {kwargs.get('mostly', 1.0)}"
    if isinstance(observed, float):
        observed = round(observed, 4)
    return {"corpus": split.name, "language": split.language, "expectation": _expectation_name(outcome),
            "measure": measure, "observed": observed, "threshold": threshold, "success": bool(outcome["success"])}


def _fix(record: Mapping[str, Any], fields: Mapping[str, str]) -> str:
    """How to make the corpus meet the expectation, naming the setting that sets its bound."""
    column = record["expectation"].rsplit(" on ", 1)[-1] if " on " in record["expectation"] else None
    if column is None:
        return f"add text (one document per line) or lower {fields['min_lines']}"
    if column == "utf8":
        return "re-encode the file as UTF-8 (e.g. `iconv -f <encoding> -t UTF-8`)"
    if column == "language":
        label = fasttext_label(record["language"])
        return (f"give {label} text, set {fields['language']} to the corpus's language, or lower "
                f"{fields['min_language_share']}")
    if record["expectation"].startswith("expect_column_value_lengths"):
        return f"drop empty lines and split longer ones into paragraphs, or raise {fields['max_line_chars']}"
    return f"remove repeated lines (e.g. `awk '!seen[$0]++' in.txt > out.txt`) or raise {fields['max_duplicate_share']}"


def _lines_frame(files: Sequence[Path | str], max_rows: int | None = None, seed: int = 0):
    """One row per non-blank line of the files (a seeded sample of ``max_rows`` of them where there are more): text,
    whether it decoded as UTF-8, its lid.176 label. Returns (frame, the files' non-blank line count)."""
    import pandas as pd

    lines = [raw for file in files if Path(file).is_file() for raw in Path(file).read_bytes().splitlines()
             if raw.strip()]
    count = len(lines)
    if max_rows is not None and count > max_rows:
        lines = random.Random(seed).sample(lines, max_rows)
    texts, valid = [], []
    for raw in lines:
        try:
            texts.append(raw.decode("utf-8"))
            valid.append(True)
        except UnicodeDecodeError:
            texts.append(raw.decode("utf-8", errors="replace"))
            valid.append(False)
    labels = identify_languages(texts)
    frame = pd.DataFrame({"text": texts, "utf8": valid, "language": labels}, columns=["text", "utf8", "language"])
    return frame, count
