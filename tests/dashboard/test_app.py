"""The dashboard on a store the test fills: data extraction, and the Streamlit app through AppTest."""

from __future__ import annotations

import pytest

from tests.dashboard.fake_store import (
    ADAPT_RUN, CHECKED_CORPORA, EVALUATION_RUN, EXPECTATIONS, MATRIX_EXPERIMENT, MATRIX_ROWS, METHODS, REGISTERED,
)

pytestmark = pytest.mark.timeout(300)


def test_runs_are_recognised_by_what_they_logged(filled_store):
    from vocadapt.dashboards import runs as data

    client = data.client_for(filled_store)
    everything = data.load_runs(client, "kestrel-experiment")
    kinds = dict(zip(everything.frame["name"], everything.frame["kind"]))
    assert kinds[ADAPT_RUN] == "adapt" and kinds[EVALUATION_RUN] == "evaluation"
    assert all(kinds[f"{ADAPT_RUN}/{m}"] == "method" for m in METHODS)
    fertility = data.fertility_table(everything.of_kind("adapt"))
    assert set(fertility["language"]) == {"xx", "en"} and len(fertility) == 4
    bpb = data.bits_per_byte_table(everything.of_kind("method"), everything.of_kind("adapt"))
    assert set(bpb["stage"]) == {"source model", "step 0", "after LAPT"}
    assert set(bpb["stream"]) == {"xx (target)", "en (source)"}
    curves = data.loss_curves(client, everything.of_kind("method"))
    assert len(curves[curves["metric"] == "lapt_loss"]) == 10 and "lapt_learning_rate" in set(curves["metric"])
    assert "lapt_bits_per_byte_target" not in set(curves["metric"])  # one point is not a curve
    table = data.benchmark_table(everything.of_kind("evaluation"))
    best = data.best_per_column(table)
    assert best["vocadapt_cloze_en.acc_bytes"].startswith("source of")
    assert best["vocadapt_cloze_xx.acc_bytes"] == EVALUATION_RUN
    assert not [column for column in table.columns if column.endswith("sample_len")]
    speed = data.throughput_table(everything.of_kind("evaluation")).set_index(["model", "task"])
    assert speed.loc[("adapted", "vocadapt_translation_en_xx"), "speed_up_chars"] == 1.5
    assert speed.loc[("adapted", "vocadapt_translation_xx_en"), "speed_up_chars"] == 0.8
    assert data.similarity_tables(client, everything.of_kind("evaluation"))[EVALUATION_RUN]["anchors"] == 256
    registry = data.registered_models(client)
    assert registry.loc[0, "model"] == REGISTERED and registry.loc[0, "aliases"] == "candidate"
    assert registry.loc[0, "method"] == METHODS[-1]


def test_corpus_expectations_are_read_from_the_runs_artifact(filled_store):
    from vocadapt.dashboards import runs as data

    client = data.client_for(filled_store)
    everything = data.load_runs(client, "kestrel-experiment")
    adapt = everything.of_kind("adapt")
    shown = data.expectation_runs(everything, adapt)
    assert list(shown["name"]) == [ADAPT_RUN]  # the method and evaluation runs logged no suite
    table = data.expectation_table(client, shown)
    assert len(table) == len(CHECKED_CORPORA) * len(EXPECTATIONS) and table["success"].all()
    assert set(table["corpus"]) == set(CHECKED_CORPORA) and set(table["expectation"]) == set(EXPECTATIONS)
    rows = table.set_index(["corpus", "expectation"])
    assert rows.loc[("target training", EXPECTATIONS[0]), "observed"] == CHECKED_CORPORA["target training"][1]
    assert rows.loc[("source-language held-out", EXPECTATIONS[-1]), "measure"] == "share of lines labelled en"
    assert data.expectation_runs(everything, adapt.iloc[:0]).empty  # an adapt run not chosen is not shown
    matrix = data.load_runs(client, MATRIX_EXPERIMENT)  # a language matrix's own run, with no adapt run chosen
    shown = data.expectation_runs(matrix, matrix.of_kind("adapt"))
    assert list(shown["kind"]) == ["matrix"]
    assert len(data.expectation_table(client, shown)) == len(MATRIX_ROWS) * len(EXPECTATIONS)


def test_app_renders_every_section(filled_store, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from vocadapt.cli.commands.dashboard import app_path

    monkeypatch.setenv("MLFLOW_TRACKING_URI", filled_store)
    app = AppTest.from_file(str(app_path()), default_timeout=120).run()
    assert not app.exception, app.exception
    headers = [h.value for h in app.header]
    for section in ("Fertility", "Bits per byte", "Training curves", "Benchmark", "throughput", "Parameter",
                    "similarity", "Corpus expectations", "Registered models"):
        assert any(section.lower() in h.lower() for h in headers), (section, headers)
    text = " ".join(m.value for m in app.markdown)
    assert ADAPT_RUN in text and all(m in text for m in METHODS) and EVALUATION_RUN in text
    assert "Best per column" in text and "candidate" in text
    evaluated = len(CHECKED_CORPORA) * len(EXPECTATIONS)
    assert f"`{ADAPT_RUN}`: **{evaluated} of {evaluated} expectations met** on {len(CHECKED_CORPORA)} corpora" in text
    expectations = app.table[0].value
    assert len(expectations) == evaluated and set(expectations["expectation"]) == set(EXPECTATIONS)
    assert set(expectations["success"]) == {"met"}
    assert "vocadapt_translation_en_xx: 1.50x" in text and "vocadapt_translation_xx_en: 0.80x" in text  # every task
    assert not [i.value for i in app.info if "No " in i.value], [i.value for i in app.info]
    assert any(MATRIX_EXPERIMENT in c.value for c in app.caption), "the matrix in another experiment is not named"
    # deselecting every evaluation run leaves their sections out, with a hint, not an error or an empty section
    app.sidebar.multiselect[1].set_value([]).run()
    assert not app.exception
    assert any("when an evaluation run is selected" in c.value for c in app.caption)
    assert not any("Benchmark" in h.value for h in app.header)


def test_energy_per_run_and_stage_is_read_from_the_metrics(filled_store):
    from tests.dashboard.fake_store import ENERGY_COUNTRY, ENERGY_MODE, GRID_KG_PER_KWH, expected_energy_kwh
    from vocadapt.dashboards import runs as data

    client = data.client_for(filled_store)
    everything = data.load_runs(client, "kestrel-experiment")
    table = data.energy_table(everything.frame)
    totals = table[table["stage"] == "total"].set_index("run")
    assert set(totals.index) == set(expected_energy_kwh())  # every run that measured, and only those
    for run, kwh in expected_energy_kwh().items():
        assert totals.loc[run, "kwh"] == pytest.approx(kwh)
        assert totals.loc[run, "kg_co2eq"] == pytest.approx(kwh * GRID_KG_PER_KWH)
        stages = table[(table["run"] == run) & (table["stage"] != "total")]
        assert stages["kwh"].sum() == pytest.approx(kwh)  # the total is the sum of the stages shown
    assert list(table.loc[table["run"] == ADAPT_RUN, "stage"]) == ["tokenizer", "init", "lapt", "evaluation", "total"]
    assert set(table["country"]) == {ENERGY_COUNTRY} and set(table["mode"]) == {ENERGY_MODE}


def test_app_shows_energy_per_run_and_stage(filled_store, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from tests.dashboard.fake_store import ENERGY_COUNTRY, GRID_KG_PER_KWH, METHOD_KWH, expected_energy_kwh
    from vocadapt.cli.commands.dashboard import app_path

    monkeypatch.setenv("MLFLOW_TRACKING_URI", filled_store)
    app = AppTest.from_file(str(app_path()), default_timeout=120).run()
    assert not app.exception, app.exception
    assert any("Energy and CO2" in h.value for h in app.header)
    text = " ".join(m.value for m in app.markdown)
    for run, kwh in expected_energy_kwh().items():
        assert (f"`{run}`: **{kwh * 1000:.4g} Wh**, **{kwh * GRID_KG_PER_KWH * 1000:.4g} g CO2eq** on the "
                f"{ENERGY_COUNTRY} grid") in text, run
    assert f"| `{ADAPT_RUN}/{METHODS[0]}` | lapt | {METHOD_KWH['lapt'] * 1000:.4g} |" in text


def test_dashboard_command_refuses_a_missing_store(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from vocadapt.cli.app import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    result = CliRunner().invoke(app, ["dashboard"])
    assert result.exit_code == 2
    assert "no MLflow store" in " ".join(result.output.split())


def test_dashboard_app_is_found_through_the_namespace():
    from vocadapt.cli.commands.dashboard import app_path, dashboard_command_line

    assert app_path().name == "app.py" and app_path().parent.name == "dashboards"
    line = dashboard_command_line(8600)
    assert line[1:4] == ["-m", "streamlit", "run"] and "127.0.0.1" in line and "8600" in line


def test_language_matrix_rows_are_its_child_runs(filled_store):
    from vocadapt.dashboards import runs as data

    client = data.client_for(filled_store)
    everything = data.load_runs(client, MATRIX_EXPERIMENT)
    assert list(everything.of_kind("matrix")["name"]) == ["languages"]
    # the children log fertility.* metrics too, yet they are matrix rows, not adaptation runs
    assert everything.of_kind("adapt").empty and len(everything.of_kind("language")) == len(MATRIX_ROWS)
    table = data.language_matrix_table(everything.of_kind("language"), everything.of_kind("matrix"))
    assert sorted(table["row"]) == sorted(row[0] for row in MATRIX_ROWS)
    by_language = table.set_index("language")
    for language, script, delimited, parity_source, parity_target in MATRIX_ROWS:
        assert by_language.loc[language, "script"] == script
        assert by_language.loc[language, "parity.source"] == pytest.approx(parity_source)
        assert by_language.loc[language, "parity.target"] == pytest.approx(parity_target)
        assert by_language.loc[language, "source_over_target_tokens"] == pytest.approx(parity_source / parity_target)
        assert pd_isna(by_language.loc[language, "tokens_per_word.source"]) == (not delimited)
    long = data.language_matrix_long(table)
    assert set(long["fertility"]["tokenizer"]) == {"source", "target", "expanded"}
    assert len(long["speed_up"]) == 2 * len(MATRIX_ROWS) and len(long["bpb"]) == 3 * len(MATRIX_ROWS)
    assert data.experiments_with_matrix(client) == [MATRIX_EXPERIMENT]


def test_app_shows_the_language_matrix(filled_store, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from vocadapt.cli.commands.dashboard import app_path

    monkeypatch.setenv("MLFLOW_TRACKING_URI", filled_store)
    monkeypatch.setenv("VOCADAPT_DASHBOARD_EXPERIMENT", MATRIX_EXPERIMENT)
    app = AppTest.from_file(str(app_path()), default_timeout=120).run()
    assert not app.exception, app.exception
    assert any("Language matrix" in h.value for h in app.header)
    assert any("Corpus expectations" in h.value for h in app.header)
    assert len(app.table[0].value) == len(MATRIX_ROWS) * len(EXPECTATIONS)  # the matrix run's own records
    assert any("no adaptation or evaluation runs" in i.value for i in app.info)
    table = app.dataframe[0].value
    assert sorted(table.index) == sorted(row[0] for row in MATRIX_ROWS)
    assert table.index[0] == max(MATRIX_ROWS, key=lambda row: row[3])[0], "hardest language for the source first"
    assert len(app.get("vega_lite_chart")) == 3  # fertility, speed-up, bits per byte
    measure = next(box for box in app.selectbox if box.label == "Matrix measure")
    assert "parity" in measure.options and measure.value == "tokens_per_character"
    measure.set_value("parity").run()
    assert not app.exception, app.exception


def pd_isna(value) -> bool:
    import pandas as pd

    return bool(pd.isna(value))


def test_runs_sharing_a_name_or_unfinished_get_distinct_labels(tmp_path):
    """The same config run twice (make demo, then again) and a crashed evaluation: every label stays unique, so
    selections, tables and plots never merge two runs."""
    from vocadapt.dashboards import runs as data
    from vocadapt.platform.tracking import Tracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = Tracker(uri, "repeats", artifact_root=tmp_path / "artifacts")
    for _ in range(2):
        with tracker.run("again", tags={"vocadapt.suite": "offline"}) as run:
            tracker.log_metrics(run.info.run_id, {"benchmark.task.acc": 0.5})
    with pytest.raises(RuntimeError), tracker.run("again", tags={"vocadapt.suite": "offline"}):
        raise RuntimeError("crashed")
    everything = data.load_runs(data.client_for(uri), "repeats")
    labels = list(everything.frame["label"])
    assert len(set(labels)) == 3 and sum("(failed)" in label for label in labels) == 1
    assert len(data.benchmark_table(everything.of_kind("evaluation"))) == 2  # both finished runs, one row each
