"""One module per command: ``register(app)`` adds it to the ``vocadapt`` typer app."""
