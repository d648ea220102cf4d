"""``vocadapt lapt``: continued pre-training of one model on Ray Train, tracked in MLflow."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from vocadapt.platform.commands._errors import user_errors


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
            result = run_lapt_command(config, model, output)
        typer.echo(f"trained model: {result.model_dir}")
        typer.echo("bits per byte after LAPT: " + ", ".join(f"{k}={v:.4f}" for k, v in result.bits_per_byte.items()))
        typer.echo(f"median throughput: {result.tokens_per_second:.0f} real tokens/s over all workers")


def run_lapt_command(config, model: Path | None, output: Path | None):
    """Resolve inputs, open an MLflow run, train on Ray; returns the ``LaptRunResult``."""
    from vocadapt.platform.commands._errors import UserError
    from vocadapt.platform.ray_train import run_lapt_on_ray
    from vocadapt.platform.sources import read_documents, resolve_inputs
    from vocadapt.platform.tracking import Tracker, resolve_tracking_uri

    if not config.lapt.max_steps and not config.lapt.max_tokens:
        raise UserError("lapt has no budget: set lapt.max_steps or lapt.max_tokens to a positive number")
    inputs = resolve_inputs(config)
    model_dir = Path(model or inputs.source_model)
    if not model_dir.is_dir():
        raise UserError(f"model {model_dir} is not a local folder; pass --model with a saved model folder "
                        "(run `vocadapt assets` for the embedded default)")
    workdir = Path(config.output_dir) / config.name
    held_out = {"target": read_documents(inputs.target_validation, config.evaluation.max_documents),
                "source": read_documents(inputs.source_validation, config.evaluation.max_documents)}
    tracker = Tracker(resolve_tracking_uri(config.tracking.tracking_uri), config.tracking.experiment)
    with tracker.run(f"{config.name}-lapt", tags={"vocadapt.stage": "lapt", "vocadapt.model": str(model_dir)}) as run:
        tracker.log_params(run.info.run_id, {k: v for k, v in config.flat().items() if k.startswith("lapt.")})
        return run_lapt_on_ray(
            model_dir, model_dir, config.lapt, target_files=list(inputs.target_train),
            source_files=list(inputs.source_train), eval_documents={k: v for k, v in held_out.items() if v},
            output_dir=output or workdir / "lapt", run_name=f"{config.name}-lapt",
            storage_path=config.lapt.storage_path or (workdir / "ray").resolve(), seed=config.seed,
            tracking_uri=tracker.tracking_uri, mlflow_run_id=run.info.run_id,
        )
