"""Offline lm-evaluation-harness tasks built from held-out corpora: cloze per language, translation per direction.

The folder holds one JSON-lines data file and one task YAML per task (``dataset_path: json`` with local
``data_files``), so lm-eval runs them with no hub. Tasks are named ``vocadapt_cloze_<lang>`` and
``vocadapt_translation_<src>_<tgt>``, carry the suite version in ``metadata.version``, and are written byte for
byte the same for the same corpora, suite and seed. The folder is built under a temporary name and renamed when
complete.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from vocadapt.components.evaluation.cloze import build_cloze_items
from vocadapt.components.evaluation.prompts import SHOT_SEPARATOR, STOP, translation_header, translation_query
from vocadapt.components.errors import UserError
from vocadapt.platform.evaluation.suites import SuiteConfig


@dataclass(frozen=True)
class HeldOutData:
    """Where the held-out text is: ``monolingual[lang]`` one document per line, ``parallel[lang]`` JSON lines with
    keys ``en`` and ``lang`` (test split), ``parallel_shots[lang]`` the same for few-shot examples (validation)."""

    monolingual: Mapping[str, Path]
    parallel: Mapping[str, Path]
    parallel_shots: Mapping[str, Path]

    @classmethod
    def from_embedded(cls, languages: Sequence[str]) -> HeldOutData:
        from vocadapt.platform.assets.embedded import load_assets

        targets = [lang for lang in languages if lang != "en"]
        assets = load_assets(languages=targets)
        return cls(
            monolingual={lang: assets.corpus(lang, "test") for lang in languages},
            parallel={lang: assets.parallel(lang, "test") for lang in targets},
            parallel_shots={lang: assets.parallel(lang, "validation") for lang in targets},
        )


@dataclass(frozen=True)
class TaskFolder:
    path: Path
    cloze_tasks: list[str]
    translation_tasks: list[str]

    @property
    def tasks(self) -> list[str]:
        return [*self.cloze_tasks, *self.translation_tasks]

    def translation_items(self, task: str) -> list[dict]:
        return _read_jsonl(self.path / f"{task}.jsonl")


def cloze_task_name(lang: str) -> str:
    return f"vocadapt_cloze_{lang}"


def translation_task_name(source: str, target: str) -> str:
    return f"vocadapt_translation_{source}_{target}"


def build_offline_tasks(suite: SuiteConfig, data: HeldOutData, out_dir: Path) -> TaskFolder:
    """Write the suite's cloze and translation tasks into ``out_dir`` (replaced if it exists)."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        # lm-eval reads data_files relative to the working folder: the YAMLs name the final, absolute paths.
        final = out_dir.resolve()
        cloze = [_write_cloze(suite, lang, data, staging, final) for lang in suite.cloze.languages]
        translation = [_write_translation(suite, pair, data, staging, final) for pair in suite.translation.directions]
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(out_dir, ignore_errors=True)
    staging.rename(out_dir)
    return TaskFolder(out_dir, cloze, translation)


def _write_cloze(suite: SuiteConfig, lang: str, data: HeldOutData, folder: Path, final: Path) -> str:
    documents = _read_lines(_require(data.monolingual, lang, "monolingual held-out text"))
    try:
        items = build_cloze_items(documents, n_items=suite.cloze.items, n_choices=suite.cloze.choices,
                                  min_words=suite.cloze.min_words, seed=suite.seed, key_prefix=f"{lang}-test")
    except ValueError as error:
        raise UserError(f"cloze task for {lang!r}: {error}") from error
    name = cloze_task_name(lang)
    _write_jsonl(folder / f"{name}.jsonl", [item.as_dict() for item in items])
    spec = {
        "task": name,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(final / f"{name}.jsonl")}},
        "test_split": "test",
        "output_type": "multiple_choice",
        "doc_to_text": "{{context}}",
        "doc_to_choice": "{{choices}}",
        "doc_to_target": "{{label}}",
        "target_delimiter": " ",
        # acc_bytes is the byte-length normalised accuracy the papers report; acc_norm divides by characters.
        "metric_list": [{"metric": m, "aggregation": "mean", "higher_is_better": True}
                        for m in ("acc", "acc_norm", "acc_bytes")],
        "metadata": {"version": suite.version, "suite": suite.name, "seed": suite.seed, "items": len(items)},
    }
    _write_yaml(folder / f"{name}.yaml", spec)
    return name


def _write_translation(
    suite: SuiteConfig, pair: tuple[str, str], data: HeldOutData, folder: Path, final: Path
) -> str:
    source, target = pair
    other = target if source == "en" else source
    pairs = _read_jsonl(_require(data.parallel, other, "a parallel held-out file"))
    shots_pool = _read_jsonl(_require(data.parallel_shots, other, "a parallel file for few-shot examples"))
    rng = random.Random(suite.seed)
    usable = [p for p in pairs if p.get(source, "").strip() and p.get(target, "").strip()]
    chosen = sorted(rng.sample(range(len(usable)), min(suite.translation.items, len(usable))))
    shots = rng.sample(shots_pool, min(suite.translation.shots, len(shots_pool)))
    header = translation_header(source, target)
    shot_text = "".join(f"{translation_query(s[source])} {' '.join(s[target].split())}{SHOT_SEPARATOR}"
                        for s in shots)
    rows = [
        {"key": usable[i].get("key", str(i)), "source_text": usable[i][source], "reference": usable[i][target],
         "prompt": f"{header}\n{shot_text}{translation_query(usable[i][source])}"}
        for i in chosen
    ]
    name = translation_task_name(source, target)
    _write_jsonl(folder / f"{name}.jsonl", rows)
    spec = {
        "task": name,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(final / f"{name}.jsonl")}},
        "test_split": "test",
        "output_type": "generate_until",
        # The prompt already holds the header and the shots (SAVA Table 8), fixed per suite version.
        "doc_to_text": "{{prompt}}",
        "doc_to_target": "{{reference}}",
        "target_delimiter": " ",
        "generation_kwargs": {"until": [STOP], "do_sample": False, "max_gen_toks": suite.translation.max_new_tokens},
        "metric_list": [{"metric": "chrf", "aggregation": "chrf", "higher_is_better": True}],
        "metadata": {"version": suite.version, "suite": suite.name, "seed": suite.seed, "items": len(rows),
                     "shots": len(shots)},
    }
    _write_yaml(folder / f"{name}.yaml", spec)
    return name


def _require(paths: Mapping[str, Path], lang: str, what: str) -> Path:
    if lang not in paths or not Path(paths[lang]).is_file():
        raise UserError(f"no {what} for {lang!r}: build the embedded corpora with `vocadapt assets --lang {lang}` "
                        "or pass the file")
    return Path(paths[lang])


def _read_lines(path: Path) -> list[str]:
    from vocadapt.components.input_files import read_text

    return [line.strip() for line in read_text(path, "held-out file").splitlines() if line.strip()]


def _read_jsonl(path: Path) -> list[dict]:
    from vocadapt.components.input_files import read_jsonl

    return read_jsonl(path, "held-out file", "write one JSON object per line, e.g. {\"it\": ..., \"en\": ...}")


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in rows),
                    encoding="utf-8")


def _write_yaml(path: Path, spec: dict) -> None:
    path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True), encoding="utf-8")
