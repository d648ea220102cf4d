from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def filled_store(tmp_path_factory) -> str:
    from tests.dashboard.fake_store import fill_language_matrix, fill_store

    folder = tmp_path_factory.mktemp("dashboard-store")
    uri = fill_store(folder)
    fill_language_matrix(folder)  # a second experiment, as `vocadapt languages` writes by default
    return uri
