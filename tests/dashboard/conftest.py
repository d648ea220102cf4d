from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def filled_store(tmp_path_factory) -> str:
    from tests.dashboard.fake_store import fill_store

    return fill_store(tmp_path_factory.mktemp("dashboard-store"))
