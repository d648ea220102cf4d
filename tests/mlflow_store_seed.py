"""New MLflow SQLite stores in the tests start from a copy of one migrated empty store instead of running MLflow's
migrations again.

A new SQLite store runs MLflow's whole Alembic history (1 to 2 s each on a 2-core machine; the suite opened about
70 of them: docs/benchmarks/test-suite.md). MLflow itself builds the copy, once per MLflow version and machine
(``template_store``: ``_initialize_tables`` on an empty file, nothing else in it), and a new store gets it through
SQLite's backup API (``seed_store``), which writes the copy into the store's own open connection. Everything after
that is MLflow's own: ``_verify_schema`` still checks the revision, and the default experiment is still created by the
store. Only stores a test process opens itself are seeded (``install``, from tests/conftest.py); ``mlflow_server``
copies the template into a server's folder before the server starts. A store that is not a SQLite file, or a
template that cannot be built or opened, takes MLflow's own path."""

from __future__ import annotations

import os
import sqlite3
import tempfile
from pathlib import Path

_MODULES = ("mlflow.store.db.utils", "mlflow.store.tracking.sqlalchemy_store",
            "mlflow.store.model_registry.sqlalchemy_store")


# Where the template lives: the temporary folder as it is when the module is first imported (at the session's start,
# from tests/conftest.py), not as a test redirects it later (a test that checks its own temporary folder is left
# empty found the template there).
_FOLDER = Path(tempfile.gettempdir())


def template_store() -> Path:
    """The migrated empty store for this MLflow version (built on first use; atomic, so two workers may race)."""
    import mlflow
    import sqlalchemy
    from mlflow.store.db import utils

    path = _FOLDER / f"vocadapt-tests-mlflow-{mlflow.__version__}-store.db"
    if not path.is_file():
        scratch = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        scratch.unlink(missing_ok=True)
        engine = sqlalchemy.create_engine(f"sqlite:///{scratch}")
        try:
            getattr(utils._initialize_tables, "original", utils._initialize_tables)(engine)
        finally:
            engine.dispose()
        os.replace(scratch, path)
    return path


def _sqlite_file(engine) -> bool:
    url = engine.url
    return url.get_backend_name() == "sqlite" and bool(url.database) and url.database != ":memory:"


def _open_template() -> sqlite3.Connection | None:
    """The template, opened read-only; None when it cannot be built or opened (the caller migrates instead)."""
    try:
        return sqlite3.connect(f"file:{template_store()}?mode=ro", uri=True)
    except Exception:  # noqa: BLE001 - no template: MLflow builds the store itself
        return None


def seed_store(engine, original) -> None:
    """``_initialize_tables`` for a new store: the template copied into it (MLflow's migrations where it cannot be)."""
    template = _open_template() if _sqlite_file(engine) else None
    if template is None:
        return original(engine)
    connection = engine.raw_connection()
    try:
        template.backup(connection.driver_connection)
    finally:
        connection.close()
        template.close()


def install() -> None:
    """Each module that calls ``_initialize_tables`` on a new store calls ``seed_store`` instead (this process only)."""
    import importlib

    utils = importlib.import_module(_MODULES[0])
    original = getattr(utils._initialize_tables, "original", utils._initialize_tables)

    def seeded(engine):
        return seed_store(engine, original)

    seeded.original = original
    for name in _MODULES:
        module = importlib.import_module(name)
        if hasattr(module, "_initialize_tables"):
            module._initialize_tables = seeded


def seed_file(path: Path) -> None:
    """A store file that does not exist yet, as a copy of the template (for a server started on it)."""
    if path.exists() or not path.parent.is_dir():
        return
    template = _open_template()
    if template is None:  # the server migrates its store itself
        return
    scratch = path.with_name(path.name + ".seed")
    target = sqlite3.connect(scratch)
    try:
        template.backup(target)
    except BaseException:
        target.close()
        scratch.unlink(missing_ok=True)  # no half-copied store left beside the server's
        raise
    finally:
        template.close()
    target.close()
    os.replace(scratch, path)
