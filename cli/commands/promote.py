"""``vocadapt promote`` and ``vocadapt rollback``: move registry aliases through measured gates, and back."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from vocadapt.cli.errors import user_errors

from vocadapt.components.errors import UserError

EXIT_REFUSED = 1


def load_gates(path: Path | None):
    """Gates from a YAML file: its ``promotion:`` section (a sweep config has one) or a bare mapping of gates."""
    from pydantic import ValidationError

    from vocadapt.platform.config import read_yaml_mapping
    from vocadapt.platform.registry.model_versions import PromotionGates

    if path is None:
        return PromotionGates()
    tree = read_yaml_mapping(path, "gates file", "configs/sweeps/italian-smollm2.yaml (its `promotion:` section)")
    section = tree.get("promotion", tree)
    if not isinstance(section, dict):
        raise UserError(f"gates file {path} must hold a mapping of gates (or a `promotion:` section)")
    try:
        return PromotionGates.model_validate(section)
    except ValidationError as error:
        fields = "; ".join(".".join(("promotion", *map(str, e["loc"]))) + f": {e['msg'].removeprefix('Value error, ')}"
                           for e in error.errors())
        raise UserError(f"gates in {path} are invalid ({fields}); see PromotionGates in platform/registry/gates.py") \
            from error


def register(app: typer.Typer) -> None:
    @app.command("promote")
    def promote_command(
        name: str = typer.Argument(..., help="Registered model name, e.g. vocadapt-it-smollm2-135m."),
        version: int = typer.Option(..., "--version", min=1, help="Model version to promote."),
        to: str = typer.Option("champion", "--to", help="Alias to move when every gate passes."),
        gates_path: Optional[Path] = typer.Option(
            None, "--gates", help="YAML with a `promotion:` section (e.g. a sweep config). Default: the gates "
            "recorded on the version when a sweep registered it, else the default gates."
        ),
        tracking_uri: Optional[str] = typer.Option(None, "--tracking-uri", help="Default: $MLFLOW_TRACKING_URI."),
        require_gguf: Optional[str] = typer.Option(
            None, "--require-gguf", help="f16, q8_0, q4_k_m or any: refuse unless the version has that GGUF "
            "logged with its sha256 (by `vocadapt export models:/NAME/VERSION`)."
        ),
    ) -> None:
        """Check the promotion gates against the version's logged metrics; move the alias only if all pass.

        The gates are --gates FILE's, else those the version was registered with (a sweep records its
        `promotion:` section), else the defaults; the first line printed says which."""
        from mlflow.exceptions import MlflowException
        from rich.console import Console

        from vocadapt.platform.registry.model_versions import explain_mlflow_error, gate_table, promote, registry_client

        with user_errors():
            if require_gguf is not None:
                from vocadapt.components.export.gguf import QUANTS

                if require_gguf not in (*QUANTS, "any"):
                    raise UserError(f"--require-gguf {require_gguf!r}: choose one of {', '.join(QUANTS)}, or any")
            gates = load_gates(gates_path) if gates_path is not None else None  # None: recorded, else default
            try:
                client = registry_client(tracking_uri)
                if require_gguf is not None:
                    from vocadapt.platform.serving.gguf_export import require_exported_gguf

                    gguf = require_exported_gguf(client, name, version, require_gguf)
                decision = promote(client, name, version, alias=to, gates=gates,
                                   gates_from=f"{gates_path} (--gates)")
            except MlflowException as error:
                raise explain_mlflow_error(error) from error
        console = Console()
        if require_gguf is not None:
            console.print(f"GGUF: {gguf} (--require-gguf {require_gguf})", markup=False, highlight=False,
                          soft_wrap=True)
        console.print(f"gates: {decision.gates_from}", markup=False, highlight=False, soft_wrap=True)
        console.print(gate_table(decision))
        if not decision.accepted:
            where = f"stays at version {decision.previous}" if decision.previous is not None else "stays unset"
            console.print(f"[red]refused[/]: {name}@{to} {where}")
            raise typer.Exit(code=EXIT_REFUSED)
        was = f"was version {decision.previous}" if decision.previous is not None else "was unset"
        console.print(f"{name}@{to} -> version {version} ({was})")

    @app.command("rollback")
    def rollback_command(
        name: str = typer.Argument(..., help="Registered model name."),
        alias: str = typer.Option("champion", "--alias", help="Alias to move back."),
        tracking_uri: Optional[str] = typer.Option(None, "--tracking-uri", help="Default: $MLFLOW_TRACKING_URI."),
    ) -> None:
        """Move the alias back to the version it pointed at before the last promotion."""
        from mlflow.exceptions import MlflowException

        from vocadapt.platform.registry.model_versions import explain_mlflow_error, registry_client, rollback

        with user_errors():
            try:
                current, previous = rollback(registry_client(tracking_uri), name, alias=alias)
            except MlflowException as error:
                raise explain_mlflow_error(error) from error
        typer.echo(f"{name}@{alias}: version {current} -> version {previous}")
