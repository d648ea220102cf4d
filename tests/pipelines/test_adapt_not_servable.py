"""adapt's registration step when the serve check refuses the best model: nothing is registered, the reasons are
printed and logged on the parent run, and the run goes on (its trained models stay). adapt's own models always
serve, so the refusal is forced by replacing register_model with one that refuses, as the real check does
(tests/registry/test_serve_check.py covers the check itself)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from vocadapt.pipelines.adapt import _register
from vocadapt.pipelines.adapt_outcomes import MethodOutcome
from vocadapt.platform.config import ExperimentConfig
from vocadapt.platform.serving.serve_check import NotServableError


class _Tags:
    def __init__(self) -> None:
        self.tags: dict[str, dict[str, str]] = {}

    def set_tags(self, run_id: str, tags: dict[str, str]) -> None:
        self.tags.setdefault(run_id, {}).update(tags)


def test_a_model_that_would_not_serve_is_not_registered(monkeypatch, tmp_path):
    def refuse(*args, **kwargs):
        raise NotServableError("embedding rows 400 but config.vocab_size 512: resize the embeddings")

    monkeypatch.setattr("vocadapt.platform.registry.model_versions.register_model", refuse)
    config = ExperimentConfig.model_validate({"target": {"language": "it"}})
    console = Console(record=True, width=200)
    tracker = _Tags()
    best = MethodOutcome("fvt", "child-run", Path(tmp_path))
    assert _register(config, tracker, best, {}, "parent-run", console) is None
    printed = console.export_text()
    assert "not registered" in printed and "vocab_size 512" in printed
    assert "vocab_size 512" in tracker.tags["parent-run"]["vocadapt.not_registered"]
