"""Evaluation suites: typed, versioned definitions read from ``configs/evaluation/<name>.yaml``.

An *offline* suite builds its tasks from the embedded corpora's test split (no hub needed); a *cluster* suite names
lm-evaluation-harness tasks (its registry's, or ours under ``configs/evaluation/tasks/``) for machines with a hub.
The suite's ``version`` is written into every task it generates, so scores from different task definitions are
never mixed silently.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from vocadapt.components.errors import UserError
from vocadapt.components.typed_settings import StrictSettings, validation_problems
from vocadapt.platform.config import set_dotted

SUITES_DIR = Path(__file__).resolve().parents[2] / "configs" / "evaluation"
TASKS_DIR = SUITES_DIR / "tasks"


class _Section(StrictSettings):
    """A suite section: unknown keys are refused with the nearest valid name."""


class ClozeSection(_Section):
    languages: list[str] = Field(["it", "en"], description="Languages with a cloze task (test split of each).")
    items: int = Field(200, ge=1, description="Cloze items per language.")
    choices: int = Field(4, ge=2, description="Choices per item: the true continuation and distractors.")
    min_words: int = Field(8, ge=2, description="Least words a held-out document needs to become an item.")


class TranslationSection(_Section):
    directions: list[tuple[str, str]] = Field(
        [("en", "it"), ("it", "en")], description="(source, target) language pairs, from the parallel test split."
    )
    items: int = Field(100, ge=1, description="Held-out pairs per direction.")
    shots: int = Field(1, ge=0, description="Solved examples in the prompt (drawn from the validation split).")
    max_new_tokens: int = Field(96, ge=1, description="Longest generated translation, in tokens.")


class HarnessSection(_Section):
    batch_size: int = Field(8, ge=1, description="lm-eval batch size.")
    max_length: int = Field(512, ge=32, description="Longest context lm-eval scores, in tokens.")
    limit: int | None = Field(None, ge=1, description="Examples per task (None: all) - for quick checks.")


class GenerationSection(_Section):
    backend: Literal["transformers", "vllm"] = Field("transformers", description="Who generates.")
    examples: int = Field(32, ge=1, description="Translation prompts generated for the throughput measurement.")
    max_new_tokens: int = Field(64, ge=1, description="Longest generation, in tokens.")
    batch_size: int = Field(8, ge=1, description="Prompts per generate() call (transformers backend).")
    repeats: int = Field(3, ge=1, description="Timed repeats per model and task, taken in turn; the median counts.")


class BitsPerByteSection(_Section):
    documents: int = Field(128, ge=1, description="Held-out documents per language.")
    max_length: int = Field(256, ge=16, description="Longest window scored at once, in tokens.")
    batch_size: int = Field(8, ge=1, description="Windows per forward pass.")


class SimilaritySection(_Section):
    anchors_per_kind: int = Field(
        128, ge=1, description="Anchors among word-initial tokens, and as many among the rest (SAVA §6)."
    )


class SuiteConfig(_Section):
    """One evaluation suite."""

    name: str = Field(description="Suite name, also the prefix of its logged metrics.")
    version: int = Field(1, ge=1, description="Bumped whenever the tasks change; written into every task.")
    kind: Literal["offline", "cluster"] = Field(description="Built from embedded corpora, or lm-eval tasks by name.")
    seed: int = Field(0, description="Seed for item sampling: same seed and corpora, same tasks.")
    tasks: list[str] = Field(default_factory=list, description="lm-eval task names (cluster suites).")
    num_fewshot: int = Field(0, ge=0, description="Shots for the lm-eval tasks of a cluster suite.")
    task_fewshot: dict[str, int] = Field(
        default_factory=dict,
        description="Shots for named tasks of a cluster suite where they differ from num_fewshot (SAVA: 2-shot "
                    "SQuAD-it); every name must be one of the suite's tasks.",
    )
    cloze: ClozeSection = Field(default_factory=ClozeSection)
    translation: TranslationSection = Field(default_factory=TranslationSection)
    harness: HarnessSection = Field(default_factory=HarnessSection)
    generation: GenerationSection = Field(default_factory=GenerationSection)
    bits_per_byte: BitsPerByteSection = Field(default_factory=BitsPerByteSection)
    similarity: SimilaritySection = Field(default_factory=SimilaritySection)

    @model_validator(mode="after")
    def _shots_name_tasks(self) -> SuiteConfig:
        unknown = sorted(set(self.task_fewshot) - set(self.tasks))
        if unknown:
            raise ValueError(f"task_fewshot names tasks the suite does not run: {unknown}; add them to tasks")
        if any(shots < 0 for shots in self.task_fewshot.values()):
            raise ValueError("task_fewshot: shots must be 0 or more")
        return self

    def fewshot_groups(self) -> dict[int, list[str]]:
        """Cluster tasks grouped by their number of shots (lm-eval takes one num_fewshot per evaluation)."""
        groups: dict[int, list[str]] = {}
        for task in self.tasks:
            groups.setdefault(self.task_fewshot.get(task, self.num_fewshot), []).append(task)
        return groups


def available_suites() -> list[str]:
    return sorted(path.stem for path in SUITES_DIR.glob("*.yaml"))


def load_suite(name_or_path: str | Path, overrides: dict | None = None) -> SuiteConfig:
    """A suite by name (``configs/evaluation/<name>.yaml``) or by path, with top-level field ``overrides``."""
    path = Path(name_or_path)
    if not path.suffix:
        path = SUITES_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        raise UserError(f"no evaluation suite {str(name_or_path)!r}: use one of {', '.join(available_suites())} "
                        "or the path of a suite YAML")
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    for dotted, value in (overrides or {}).items():
        set_dotted(data, dotted, yaml.safe_load(value) if isinstance(value, str) else value, SuiteConfig)
    try:
        return SuiteConfig.model_validate(data)
    except ValidationError as error:
        raise UserError(f"evaluation suite {path}: {'; '.join(validation_problems(error))}") from error
