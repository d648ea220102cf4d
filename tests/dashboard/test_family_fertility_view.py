"""The family-fertility view on the committed matrix (benchmarks/results/family-fertility/matrix.json)."""

from __future__ import annotations

import json

import pandas as pd

import pytest

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def committed():
    from vocadapt.dashboards.family_fertility import COMMITTED, load_matrix

    return load_matrix(COMMITTED)


def test_matrix_table_has_a_row_per_family_and_variant(committed):
    from vocadapt.dashboards.family_fertility import matrix_frame, matrix_table

    frame = matrix_frame(committed)
    table = matrix_table(frame, "tokens_per_word")
    expected = [(entry["display"], variant) for entry in committed["families"].values() for variant in entry["variants"]]
    assert list(table.index) == expected
    assert "it held-out" in table.columns and "en held-out" in table.columns
    first = committed["rows"][0]
    assert table.loc[(first["display"], first["variant"]), f"{first['language']} {first['text']}"] == pytest.approx(
        first["tokens_per_word"])
    reductions = matrix_table(frame, "reduction")
    assert (reductions.xs("source", level="variant") == 0).all().all()  # the source against itself


def test_published_figures_sit_beside_the_measured_ones(committed):
    from vocadapt.dashboards.family_fertility import matrix_frame, published_table

    table = published_table(committed, matrix_frame(committed))
    mistral = table[(table["family"] == "mistral_v1") & (table["measure"] == "tokens_per_word")
                    & (table["language"] == "it")]
    assert list(mistral["value"]) == [1.88, 2.05]  # SAVA Table 2: CulturaX, Wikipedia
    source = next(row for row in committed["rows"] if row["family"] == "mistral_v1" and row["variant"] == "source"
                  and row["language"] == "it" and row["text"] == "held-out")
    assert f"held-out {source['tokens_per_word']:.3f}" in mistral["measured_here"].iloc[0]


def test_app_shows_the_committed_matrix(committed, tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from vocadapt.cli.commands.dashboard import app_path

    monkeypatch.setenv("VOCADAPT_HOME", str(tmp_path))  # no matrix there: the committed one is shown
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    app = AppTest.from_file(str(app_path()), default_timeout=120).run()
    app.sidebar.radio[0].set_value("Family fertility").run()
    assert not app.exception, app.exception
    assert "families" in app.title[0].value
    assert [header.value for header in app.header][:2] == ["Fertility matrix", "Published figures beside the "
                                                           "measured ones"]
    shown = app.dataframe[0].value
    displays = [entry["display"] for entry in committed["families"].values()]
    assert list(dict.fromkeys(shown.index.get_level_values(0))) == displays
    app.selectbox[0].set_value("token reduction against the source").run()
    assert not app.exception, app.exception
    assert (app.dataframe[0].value.xs("source", level="variant") == 0).all().all()


def test_a_matrix_under_the_home_is_preferred(tmp_path, monkeypatch):
    from vocadapt.dashboards.family_fertility import COMMITTED, matrix_path

    assert matrix_path(tmp_path) == COMMITTED
    mine = tmp_path / "benchmarks" / "family-fertility" / "matrix.json"
    mine.parent.mkdir(parents=True)
    mine.write_text(json.dumps({"rows": []}), encoding="utf-8")
    assert matrix_path(tmp_path) == mine


def test_two_families_with_one_vocabulary_are_flagged(committed):
    from vocadapt.dashboards.family_fertility import identical_sources, matrix_frame

    frame = matrix_frame(committed)
    distinct = frame.drop_duplicates(subset=["variant", "column", "tokens_per_word"])
    assert identical_sources(distinct) == []
    twin = frame[frame["family"] == "llama3_1"].assign(family="twin", display="Twin")
    assert ("Llama-3.1", "Twin") in identical_sources(pd.concat([distinct, twin]))


def test_the_app_run_left_no_dashboard_as_main_module():
    """Streamlit installed the app as ``__main__`` in ``test_app_shows_the_committed_matrix``; conftest's
    ``main_module_and_tracking_uri_kept`` put pytest's back, so a later test's spawned processes (DDP) do not run
    the dashboard."""
    import sys

    assert not str(getattr(sys.modules["__main__"], "__file__", "")).endswith("app.py")
