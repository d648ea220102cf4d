"""``vocadapt twin``: write a twin of a model family (random weights in its real shape, its real tokenizer), and
optionally install it in a local huggingface_hub cache under the family's real hub id."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from vocadapt.cli.errors import user_errors


def register(app: typer.Typer) -> None:
    @app.command("twin")
    def twin_command(
        family: str = typer.Argument(..., help="Catalogue name or hub id: llama3_1, llama2, mistral_v1, qwen3, "
                                     "gemma3, deepseek_v3 (platform/families/families.yaml)."),
        out: Path = typer.Option(..., "--out", help="Folder to write the twin into (new or empty)."),
        layers: int = typer.Option(1, "--layers", min=1, help="Decoder layers (the real model has dozens)."),
        width: str = typer.Option("real", "--width", help="'real': the family's hidden size (surgery and memory at "
                                  "real size); 'reduced': hidden 64, small enough to train in a test."),
        seed: int = typer.Option(0, "--seed", min=0, help="Seed of the random weights (same seed, same bytes)."),
        dtype: str = typer.Option("bfloat16", "--dtype", help="Weights dtype: bfloat16, float16 or float32."),
        hub_cache: Optional[Path] = typer.Option(
            None, "--hub-cache", help="Also install it in this huggingface_hub cache under the family's hub id, so "
            "HF_HUB_OFFLINE=1 HF_HUB_CACHE=DIR makes `source.model: <hub id>` resolve to it."),
        hub_id: Optional[str] = typer.Option(None, "--hub-id", help="Install under this hub id instead."),
    ) -> None:
        """Write a twin of FAMILY: random weights, NOT the real model; for tests and dry runs of the pipelines.

        It has the family's architecture class, tokenizer files (chat template, special tokens), embedding rows
        and (with --width real) hidden size, at reduced depth; config.json records that it is a twin, and so does
        every model vocadapt adapts and registers from it."""
        from vocadapt.components.errors import UserError
        from vocadapt.platform.families.catalogue import model_family
        from vocadapt.platform.families.twins import TwinShape, build_twin, install_twin_in_hub_cache

        with user_errors():
            if dtype not in ("bfloat16", "float16", "float32"):
                raise UserError(f"--dtype {dtype!r}: use bfloat16, float16 or float32")
            chosen = model_family(family)
            from vocadapt.components.input_files import refuse_output_over_inputs
            from vocadapt.platform.assets.embedded import vocadapt_home

            refuse_output_over_inputs(out, "--out", [("the fetched tokenizers (vocadapt assets --family)",
                                                      vocadapt_home() / "families"), ("--hub-cache", hub_cache)])
            folder = build_twin(chosen.name, out, TwinShape(layers, width, dtype), seed=seed)
            typer.echo(f"twin of {chosen.display} ({layers} layers, {width} width; random weights, not the real "
                       f"model): {folder}")
            if hub_cache is not None:
                name = hub_id or chosen.hub_id
                snapshot = install_twin_in_hub_cache(folder, name, hub_cache)
                typer.echo(f"installed as {name} in {hub_cache} ({snapshot.name[:12]}); use it with\n"
                           f"  HF_HUB_OFFLINE=1 HF_HUB_CACHE={hub_cache} vocadapt adapt CONFIG "
                           f"--set source.model={name}")
