"""``vocadapt languages``: the language matrix (fertility, parity, zero-shot bits per byte, generation speed-up)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from vocadapt.cli.errors import user_errors

from vocadapt.components.errors import UserError


def register(app: typer.Typer) -> None:
    @app.command("languages")
    def languages_command(
        lang: list[str] = typer.Option(
            [], "--lang", help="Target language (repeatable); default: de el hi it ja tr vi km."
        ),
        quick: bool = typer.Option(False, "--quick", help="Smaller tokenizers, fewer documents and prompts."),
        protect_lexicon: str = typer.Option(
            "embedded", "--protect-lexicon", help="English word list whose words expansion must not change, besides "
            "the English held-out lines: 'embedded' (lexicons/en.txt of `vocadapt assets`), a file (one word per "
            "line), or 'none' for the lines alone.",
        ),
        output: Path = typer.Option(
            Path("runs/languages"), "--output", help="Folder for languages.md and languages.json."
        ),
        experiment: str = typer.Option("vocadapt-languages", "--experiment", help="MLflow experiment name."),
        tracking_uri: Optional[str] = typer.Option(
            None, "--tracking-uri", help="MLflow URI; default $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db here."
        ),
    ) -> None:
        """Measure SmolLM2's tokenizer, a replaced and an expanded vocabulary on every language (embedded default)."""
        import dataclasses
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from vocadapt.pipelines.languages import (
            MATRIX_LANGUAGES,
            MatrixSettings,
            embedded_language_corpus,
            run_language_matrix,
        )
        from vocadapt.platform.assets.embedded import load_assets
        from vocadapt.platform.tracking import Tracker, resolve_tracking_uri

        with user_errors():
            languages = list(dict.fromkeys(code.strip().lower() for code in lang)) or list(MATRIX_LANGUAGES)
            if "en" in languages:
                raise UserError("en is the reference language of every row; leave it out of --lang")
            assets = load_assets(languages=languages)  # names the `vocadapt assets --lang` to run when missing
            from vocadapt.components.input_files import refuse_output_over_inputs

            lexicon = None if protect_lexicon.strip().lower() in ("none", "embedded") else protect_lexicon
            refuse_output_over_inputs(output, "--output", [("the embedded default", assets.home),
                                                           ("--protect-lexicon", lexicon)])
            corpora = [embedded_language_corpus(assets, language) for language in languages]
            tracker = Tracker(resolve_tracking_uri(tracking_uri), experiment)
            settings = MatrixSettings.quick() if quick else MatrixSettings()
            settings = dataclasses.replace(
                settings, protect_lexicon=None if protect_lexicon.strip().lower() == "none" else protect_lexicon
            )
            run_language_matrix(corpora, assets.model_dir, output, tracker, settings=settings)
