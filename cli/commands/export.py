"""``vocadapt export MODEL --format gguf``: a model folder or registered version as one GGUF file for llama.cpp,
Ollama or LM Studio, written by llama.cpp's own converter and quantiser."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from vocadapt.cli.errors import user_errors


def register(app: typer.Typer) -> None:
    @app.command("export")
    def export_command(
        model: str = typer.Argument(..., help="Model folder, or registered version: models:/NAME/VERSION or "
                                    "models:/NAME@champion."),
        format: str = typer.Option("gguf", "--format", help="Output format; gguf is the one there is."),
        quant: str = typer.Option("f16", "--quant", help="f16 (no loss), q8_0 or q4_k_m (llama.cpp's quantiser; "
                                  "bits-per-byte cost in BENCHMARKS.md)."),
        out: Optional[Path] = typer.Option(None, "--out", help="GGUF file to write. Default: FOLDER-QUANT.gguf or "
                                           "NAME-vVERSION-QUANT.gguf in the current folder."),
        overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing --out file."),
        tracking_uri: Optional[str] = typer.Option(None, "--tracking-uri", help="For models:/ URIs. Default: "
                                                   "$MLFLOW_TRACKING_URI, else ./mlflow.db."),
    ) -> None:
        """Write MODEL as a GGUF file; a registered version's file is also logged to its run with its sha256.

        Refused before anything is written when llama.cpp cannot represent the model (an architecture its
        converter lacks, a pre-tokenizer it has no name for)."""
        from vocadapt.components.errors import UserError
        from vocadapt.components.export.gguf import QUANTS
        from vocadapt.platform.serving.gguf_export import default_out_path, export_folder, export_registered

        with user_errors():
            if format != "gguf":
                raise UserError(f"--format {format!r}: the one export format is gguf")
            if quant not in QUANTS:
                raise UserError(f"--quant {quant!r}: choose one of {', '.join(QUANTS)}")
            target = out or default_out_path(model, quant)
            if target.suffix != ".gguf":
                raise UserError(f"--out {target}: name the file *.gguf")
            if target.exists() and not overwrite:
                raise UserError(f"{target} exists; pass --overwrite to replace it, or --out another file")
            if model.startswith("models:/"):
                done = export_registered(model, target, quant, tracking_uri, log=typer.echo)
                exported = done.gguf
                typer.echo(f"logged to run {done.run_id} as {done.artifact_path} (version {done.version} of "
                           f"{done.name}, tag vocadapt.gguf.{quant}.sha256)")
            else:
                if not Path(model).is_dir():
                    raise UserError(f"{model} is not a model folder; pass a folder written by save_pretrained or "
                                    "models:/NAME@champion")
                exported = export_folder(Path(model), target, quant, log=typer.echo)
        pre = exported.plan.pre_tokenizer or "none (SentencePiece-style vocabulary)"
        typer.echo(f"{exported.path} ({exported.quant}, {exported.size_bytes / 1e6:.1f} MB, "
                   f"{exported.plan.architecture}, pre-tokenizer {pre}) sha256 {exported.sha256} "
                   f"in {exported.seconds:.1f} s")
        typer.echo(f"llama.cpp tokenized {exported.probes} probe texts as the tokenizer does" if exported.probes
                   else "llama-cpp-python is not installed: only the tokenizer metadata was checked, not llama.cpp's "
                   "own tokenization (`make gguf-tools`)")
        typer.echo(f"run it: llama-cli -m {exported.path}   or   ollama create NAME -f Modelfile (FROM {exported.path})")
