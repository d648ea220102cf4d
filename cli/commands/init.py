"""``vocadapt init``: adapt a checkpoint's embeddings to a target tokenizer with one initialiser."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from vocadapt.cli.errors import user_errors

from vocadapt.components.errors import UserError


def _parse_options(pairs: list[str]) -> dict:
    import yaml

    options = {}
    for pair in pairs:
        if "=" not in pair:
            raise UserError(f"--option {pair!r} is not name=value; write e.g. --option temperature=0.1")
        name, value = pair.split("=", 1)
        options[name.strip()] = yaml.safe_load(value)
    return options


def method_names() -> list[str]:
    """The registered initialisers, read from their files (``components/initializers/<name>.py``, one per method,
    named as registered; tests/bad_input checks the two agree) so that ``--help`` does not import torch."""
    import importlib.util
    import pkgutil

    spec = importlib.util.find_spec("vocadapt.components.initializers")
    return sorted(module.name for module in pkgutil.iter_modules(spec.submodule_search_locations or [])
                  if not module.name.startswith("_"))


def register(app: typer.Typer) -> None:
    @app.command("init")
    def init_command(
        source_model: Path = typer.Option(..., "--source-model", help="Source checkpoint folder (safetensors, with its tokenizer)."),
        target_tokenizer: Path = typer.Option(..., "--target-tokenizer", help="Folder of the target tokenizer."),
        method: str = typer.Option(..., "--method", help=f"Initialiser: {', '.join(method_names())} (fvt is also 'mean')."),
        out: Path = typer.Option(..., "--out", help="Folder to write the adapted checkpoint to (must not exist)."),
        helper: Optional[str] = typer.Option(None, "--helper", help="'fasttext[:dim=100,...]', 'model:DIR' or 'vectors:FILE.vec'."),
        mode: str = typer.Option("replace", "--mode", help="replace: new vocabulary; expand: source vocabulary plus new tokens."),
        seed: int = typer.Option(0, "--seed", min=0, help="Seed of every random choice."),
        corpus: list[Path] = typer.Option([], "--corpus", help="Target-language text file (repeatable), for align and fasttext."),
        option: list[str] = typer.Option([], "--option", help="Method option name=value (repeatable)."),
        target_vocab_rows: Optional[int] = typer.Option(None, "--rows", help="Rows of the new matrices (padding); default: tokens."),
        extra_heads: int = typer.Option(0, "--extra-heads", help="Extra LM heads for multi-token prediction, copied from the head."),
        overwrite: bool = typer.Option(False, "--overwrite", help="Replace --out if it exists."),
    ) -> None:
        """Initialise the embeddings (and LM head) of SOURCE_MODEL for TARGET_TOKENIZER and write a checkpoint."""
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from vocadapt.components.initializers import MissingHelperError, configure_initializer
        from vocadapt.components.surgery import Initialisation, RowLayout, adapt_checkpoint
        from vocadapt.components.surgery.checkpoint import CheckpointWriting

        with user_errors(ValueError, KeyError, FileNotFoundError):
            from vocadapt.cli.values import at_least

            at_least("--rows", target_vocab_rows, 1, "rows of the new matrices")  # values first, then files
            at_least("--extra-heads", extra_heads, 0)
            try:
                configured = configure_initializer(method, _parse_options(option))  # looked up and checked once
            except KeyError as error:
                raise UserError(f"--method: {error.args[0]}") from error
            except ValueError as error:
                raise UserError(f"--option: {error}") from error
            for path, what in ((source_model, "--source-model"), (target_tokenizer, "--target-tokenizer"), *[(c, "--corpus") for c in corpus]):
                if not path.exists():
                    raise UserError(f"{what} {path} does not exist; give an existing path")
            if mode not in ("replace", "expand"):
                raise UserError(f"--mode must be 'replace' or 'expand', got {mode!r}")
            from vocadapt.components.input_files import refuse_output_over_inputs

            helper_kind, _, helper_path = (helper or "").partition(":")
            refuse_output_over_inputs(out, "--out", [
                ("--source-model", source_model), ("--target-tokenizer", target_tokenizer),
                ("--helper", helper_path if helper_kind in ("model", "vectors") else helper),
                *[("--corpus", path) for path in corpus]])
            if out.exists() and not overwrite:
                raise UserError(f"--out {out} already exists; choose another --out or pass --overwrite")
            from vocadapt.components.model_folder_checks import check_tokenizer_folder
            from vocadapt.pipelines.preflight import check_helper_files
            from vocadapt.platform.model_loading import check_model_folder

            check_model_folder(source_model, what="--source-model")  # files, rows, ids; safetensors, no custom code
            if target_tokenizer.is_dir():
                check_tokenizer_folder(target_tokenizer, "--target-tokenizer")
            check_helper_files(helper, what="--helper")
            try:
                record = adapt_checkpoint(
                    source_model, target_tokenizer, out,
                    Initialisation(configured, seed=seed, helper=helper, corpus_files=[str(path) for path in corpus]),
                    layout=RowLayout(mode, target_vocab_rows=target_vocab_rows),
                    writing=CheckpointWriting(overwrite=overwrite, extra_heads=extra_heads),
                )
            except MissingHelperError as error:
                raise UserError(f"{error}: pass --helper fasttext (trained on --corpus), --helper model:DIR (a "
                                "model using the target tokenizer) or --helper vectors:FILE.vec") from error
        typer.echo(json.dumps(record, indent=2, sort_keys=True))
