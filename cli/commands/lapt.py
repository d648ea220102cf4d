"""``vocadapt lapt``: continued pre-training of one model on Ray Train, tracked in MLflow."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from vocadapt.cli.errors import user_errors


def register(app: typer.Typer) -> None:
    @app.command("lapt")
    def lapt_command(
        config_path: Optional[Path] = typer.Argument(
            None, metavar="CONFIG", help="Experiment YAML; its lapt, corpus, evaluation and tracking sections apply."
        ),
        config_option: Optional[Path] = typer.Option(None, "--config", help="The same, as an option."),
        set_: list[str] = typer.Option([], "--set", help="Dotted override, e.g. lapt.max_steps=5 (repeatable)."),
        model: Optional[Path] = typer.Option(
            None, "--model", help="Model folder to train (with its tokenizer), e.g. an adapted model; default: "
            "the config's source model."
        ),
        output: Optional[Path] = typer.Option(None, "--output", help="Where the trained model goes; default: "
                                              "<output_dir>/<name>/lapt."),
    ) -> None:
        """Continue pre-training a model on mixed target/source text (Ray Train, optional DeepSpeed); log to MLflow."""
        from vocadapt.platform.config import load_config

        with user_errors(FileNotFoundError):
            config = load_config(config_option or config_path, set_)
            from vocadapt.pipelines.lapt import run_lapt
            from vocadapt.platform.model_loading import check_model_folder

            from vocadapt.components.input_files import refuse_output_over_inputs

            trained = model or config.source.model
            refuse_output_over_inputs(output or Path(config.output_dir) / config.name / "lapt", "--output", [
                ("--model" if model else "source.model", trained), ("lapt.teacher", config.lapt.teacher),
                *[(f"lapt.train_files.{stream}", name) for stream, names in (config.lapt.train_files or {}).items()
                  for name in names],
                *[("corpus.train", name) for name in (config.corpus.train if config.corpus.train != "embedded"
                                                       else [])]])
            # safetensors only, no custom code: refused before Ray starts or a run opens
            check_model_folder(model or config.source.model, what="--model" if model else "source.model",
                               trust_remote_code=config.source.trust_remote_code)

            result = run_lapt(config, model, output)
        typer.echo(f"trained model: {result.model_dir}")
        typer.echo("bits per byte after LAPT: " + ", ".join(f"{k}={v:.4f}" for k, v in result.bits_per_byte.items()))
        typer.echo(f"median throughput: {result.tokens_per_second:.0f} real tokens/s over all workers")
