"""``vocadapt serve models:/NAME@champion``: verify a registered model's files and serve it with vLLM."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from vocadapt.cli.errors import user_errors


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve_command(
        model_uri: str = typer.Argument(..., help="Registered model: models:/NAME@champion or models:/NAME/VERSION."),
        port: Optional[int] = typer.Option(None, "--port", min=1, max=65535, help="Port on 127.0.0.1 (default: a free one)."),
        download_dir: Optional[Path] = typer.Option(
            None, "--download-dir", help="Where the model files go (default: runs/served/NAME-vVERSION)."
        ),
        venv: Optional[Path] = typer.Option(
            None, "--serving-venv", help="The vLLM environment (default: $VOCADAPT_SERVING_VENV or "
            "$VOCADAPT_HOME/serving-venv; `python -m vocadapt.platform.evaluation.serving` builds it)."
        ),
        max_model_len: int = typer.Option(2048, "--max-model-len", min=1, help="Longest context vLLM allocates for."),
        tracking_uri: Optional[str] = typer.Option(None, "--tracking-uri", help="Default: $MLFLOW_TRACKING_URI."),
        check_only: bool = typer.Option(False, "--check-only", help="Download and verify, start nothing."),
    ) -> None:
        """Download the registered model, verify every file's sha256, start an OpenAI-compatible vLLM server."""
        import signal
        import time

        from mlflow.exceptions import MlflowException

        from vocadapt.platform.registry.model_versions import explain_mlflow_error, registry_client
        from vocadapt.platform.serving.registered import download_verified, parse_model_uri, serve_verified
        from vocadapt.platform.tracking import resolve_tracking_uri

        with user_errors():
            name, _, _ = parse_model_uri(model_uri)
            if port is not None and not check_only:
                _check_port(port)  # before anything is downloaded
            uri = resolve_tracking_uri(tracking_uri)
            destination = download_dir or Path("runs") / "served" / name
            try:
                model = download_verified(registry_client(uri), model_uri, destination, uri)
            except MlflowException as error:
                raise explain_mlflow_error(error) from error
        typer.echo(f"verified {model.name} version {model.version}: {model.model_dir}")
        if check_only:
            return
        # Ctrl-C, and SIGTERM from a process manager or `kill`, leave the `with` below so vLLM is stopped too (a
        # plain SIGTERM ends Python at once and orphans the server); SIGINT is re-armed because a process started
        # in the background inherits it ignored.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
        with user_errors(), serve_verified(model, venv=venv, port=port, max_model_len=max_model_len,
                                           log_file=model.model_dir.parent / f"{name}-vllm.log") as (base, served):
            typer.echo(f"serving {served} (version {model.version}) at {base}  (OpenAI API; Ctrl-C stops it)")
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                typer.echo("stopping")


def _check_port(port: int) -> None:
    """``--port`` must be a port number that nothing on 127.0.0.1 listens on yet."""
    import socket

    from vocadapt.components.errors import UserError

    if not 1 <= port <= 65535:
        raise UserError(f"--port {port}: not a port number; give one from 1 to 65535, or leave --port out for a "
                        "free one")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as error:
            raise UserError(f"--port {port}: 127.0.0.1:{port} is taken ({error.strerror}); stop what listens there, "
                            "give another --port, or leave --port out for a free one") from None


def _raise_keyboard_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt
