"""``vocadapt evaluate``: benchmarks, bits per byte, generation speed-up and embedding similarity, into MLflow."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from vocadapt.cli.errors import user_errors

from vocadapt.components.errors import UserError


def register(app: typer.Typer) -> None:
    @app.command("evaluate")
    def evaluate_command(
        model: str = typer.Option(..., "--model", help="Model folder or registered model (models:/name@alias)."),
        suite: str = typer.Option("offline", "--suite", help="Suite name in configs/evaluation/ or a YAML path."),
        compare_to: Optional[str] = typer.Option(
            None, "--compare-to", help="Source model folder: scored too, and generation measured side by side."
        ),
        helper: Optional[str] = typer.Option(None, "--helper", help="Helper model folder for embedding similarity."),
        similar_to: list[Path] = typer.Option([], "--similar-to", help="Other adapted model folders (repeatable)."),
        backend: Optional[str] = typer.Option(None, "--backend", help="Generation backend: transformers or vllm."),
        limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Examples per lm-eval task (quick checks)."),
        set_: list[str] = typer.Option([], "--set", help="Suite override, e.g. cloze.items=50 (repeatable)."),
        data: list[str] = typer.Option(
            [], "--data", help="Held-out files instead of the embedded corpora: LANG=FILE (text), LANG-en=FILE "
            "(parallel jsonl), LANG-en-shots=FILE (few-shot jsonl). Repeatable."
        ),
        experiment: Optional[str] = typer.Option(None, "--experiment", help="MLflow experiment (default: the "
                                                 "registered model's, else 'vocadapt')."),
        tracking_uri: Optional[str] = typer.Option(None, "--tracking-uri", help="MLflow tracking URI."),
        work_dir: Optional[Path] = typer.Option(None, "--work-dir", help="Keep tasks and artifacts here."),
        json_out: Optional[Path] = typer.Option(None, "--json", help="Also write a JSON summary to this file."),
        country: str = typer.Option("ITA", "--country", help="ISO alpha-3 code of the grid powering this machine, "
                                    "for the evaluation's CO2 (codecarbon, offline)."),
        energy: bool = typer.Option(True, "--energy/--no-energy", help="Measure the evaluation's energy and CO2."),
    ) -> None:
        """Score a model on an evaluation suite and log every number to MLflow."""
        from vocadapt.pipelines.evaluate import EvaluationRequest, run_evaluate, summary_json

        with user_errors():
            overrides = _overrides(set_, backend, limit)
            request = EvaluationRequest(
                # empty strings (MLproject parameters left at "") mean "not given"
                model=model, suite=suite, compare_to=compare_to or None, helper=helper or None,
                similar_to=[str(p) for p in similar_to if str(p)],
                suite_overrides=overrides, experiment=experiment, tracking_uri=tracking_uri, work_dir=work_dir,
                held_out=_held_out(data), country_iso_code=country, energy=energy,
            )
            result = run_evaluate(request)
        if json_out:
            json_out.write_text(summary_json(result), encoding="utf-8")


def _overrides(pairs: list[str], backend: str | None, limit: int | None) -> dict[str, str]:
    overrides = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(f"--set {pair!r}: write it as dotted.key=value, e.g. cloze.items=50")
        overrides[key.strip()] = value
    if backend:
        overrides["generation.backend"] = backend
    if limit:
        overrides["harness.limit"] = str(limit)
    return overrides


def _held_out(pairs: list[str]):
    if not pairs:
        return None
    from vocadapt.platform.evaluation.offline_tasks import HeldOutData

    kinds: dict[str, dict[str, Path]] = {"monolingual": {}, "parallel": {}, "parallel_shots": {}}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        path = Path(value)
        if not sep or not path.is_file():
            raise UserError(f"--data {pair!r}: write LANG=FILE, LANG-en=FILE or LANG-en-shots=FILE with an "
                            "existing file")
        parts = key.split("-")
        if len(parts) == 1:
            kinds["monolingual"][parts[0]] = path
        elif len(parts) in (2, 3) and parts[1] == "en" and (len(parts) == 2 or parts[2] == "shots"):
            kinds["parallel" if len(parts) == 2 else "parallel_shots"][parts[0]] = path
        else:
            raise UserError(f"--data {pair!r}: the key must be LANG, LANG-en or LANG-en-shots")
    return HeldOutData(**kinds)
