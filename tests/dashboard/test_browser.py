"""`vocadapt dashboard` on a real tiny adapt run (tracked by a real MLflow server, its candidate promoted with the
default gates), opened in Debian's headless Chromium through Selenium: every figure the run logged sits beside the
source model's, and every gate and the alias history of the promotion view match what the MLflow store holds, read
here with MlflowClient. With VOCADAPT_SCREENSHOTS=FOLDER each view is saved there as a PNG
(benchmarks/dashboard_screenshots.py writes the README's)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import requests

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(not (shutil.which("chromium") and shutil.which("chromedriver")),
                       reason="needs Debian's chromium and chromium-driver"),
]

PREFIXES = ("benchmark.side_by_side_", "generation.", "bpb_ood_", "parameters.")


def figure(value) -> str:
    return "-" if value is None else f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4f}"


@pytest.fixture(scope="module")
def store(tiny_adapt_over_http):
    """(client, tracking URL, experiment, adapt run, method runs, registered name and version), promoted once."""
    from mlflow.tracking import MlflowClient

    from vocadapt.platform.registry.model_versions import promote

    url, report, _ = tiny_adapt_over_http
    client = MlflowClient(url, registry_uri=url)
    name, version = report["registered"]
    if "vocadapt.promotion.champion.decision" not in client.get_model_version(name, str(version)).tags:
        promote(client, name, version)  # the default gates: accepted or refused, the decision is recorded
    experiment = client.get_experiment_by_name("tiny-e2e")
    runs = client.search_runs([experiment.experiment_id])
    parent = next(run for run in runs if run.info.run_id == report["parent_run_id"])
    methods = [run for run in runs if run.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    return client, url, experiment.name, parent, methods, name, version


@pytest.fixture(scope="module")
def dashboard(store, tmp_path_factory):
    from vocadapt.cli.commands.dashboard import dashboard_command_line, dashboard_environment
    from vocadapt.platform.evaluation.serving import free_port

    _, url, experiment, *_ = store
    folder = tmp_path_factory.mktemp("dashboard")
    port = free_port()
    with open(folder / "streamlit.log", "wb") as log:
        process = subprocess.Popen(dashboard_command_line(port), env=dashboard_environment(url, experiment),
                                   stdout=log, stderr=subprocess.STDOUT, cwd=folder)
        try:
            deadline = time.monotonic() + 90
            while not _healthy(port):
                assert process.poll() is None, (folder / "streamlit.log").read_text()[-2000:]
                assert time.monotonic() < deadline, "streamlit did not answer /_stcore/health in 90 s"
                time.sleep(0.5)
            yield f"http://127.0.0.1:{port}"
        finally:
            process.terminate()
            process.wait(timeout=30)


def _healthy(port: int) -> bool:
    try:
        return requests.get(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).text == "ok"
    except requests.RequestException:
        return False


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1500,4200", "--disable-background-networking", "--disable-component-update"):
        options.add_argument(argument)
    # the driver is Debian's: Selenium Manager never runs, nothing is downloaded
    driver = webdriver.Chrome(service=Service(executable_path=shutil.which("chromedriver")), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _wait_for(driver, texts: list[str], timeout_s: float = 120) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    def shown(d) -> bool:
        page = d.page_source
        return all(text in page for text in texts)

    try:
        WebDriverWait(driver, timeout_s, poll_frequency=0.5).until(shown)
    except Exception as error:  # noqa: BLE001 - name what is missing
        missing = [text for text in texts if text not in driver.page_source]
        raise AssertionError(f"the page never showed {missing}") from error


def _choose_view(driver, view: str, timeout_s: float = 120) -> None:
    """Click the sidebar's radio option ``view`` once Streamlit has drawn it (the main area can be drawn first, and
    on a busy machine the sidebar's widgets come seconds later)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    option = (By.XPATH, f"//label[.//p[normalize-space(text())='{view}']]")
    try:
        WebDriverWait(driver, timeout_s, poll_frequency=0.5).until(expected_conditions.element_to_be_clickable(option))
    except Exception as error:  # noqa: BLE001 - name what is missing
        raise AssertionError(f"the sidebar never offered the view {view!r}") from error
    driver.find_element(*option).click()


TABLES_SCRIPT = """return Array.from(document.querySelectorAll('table')).map(table =>
    Array.from(table.querySelectorAll('tr')).map(row =>
        Array.from(row.querySelectorAll('th, td')).map(cell => cell.innerText.trim())));"""


def _table_with(driver, first_header: str, column: str, timeout_s: float = 60) -> list[dict[str, str]]:
    """The rows of the table whose header starts with ``first_header`` and holds ``column``, as {header: text};
    read in one script call (a page Streamlit redraws meanwhile leaves no stale element), waited for."""
    from selenium.webdriver.support.ui import WebDriverWait

    def found(d):
        for table in d.execute_script(TABLES_SCRIPT):
            if table and table[0][:1] == [first_header] and column in table[0]:
                return [dict(zip(table[0], row)) for row in table[1:]]
        return None

    try:
        return WebDriverWait(driver, timeout_s, poll_frequency=0.5).until(found)
    except Exception as error:  # noqa: BLE001 - name what is missing
        raise AssertionError(f"no table with columns {first_header!r} and {column!r}") from error


def _measure(key: str) -> str:
    return key.removeprefix("benchmark.side_by_side_").removeprefix("generation.").replace(".", " ")


def expected_side_by_side(parent, methods) -> dict[str, dict[str, str]]:
    """Model -> {column: figure} from the runs' metrics: the source model's on the parent, each method's own."""
    source = {_measure(key.removeprefix("source_model.")): value for key, value in parent.data.metrics.items()
              if key.removeprefix("source_model.").startswith(PREFIXES) and key.startswith("source_model.")}
    source |= {f"held-out bpb {s}": parent.data.metrics[f"source_model.bpb_{s}"] for s in ("target", "source")}
    expected = {"source model": source}
    for run in methods:
        metrics = run.data.metrics
        own = {_measure(key): value for key, value in metrics.items() if key.startswith(PREFIXES)}
        own |= {f"held-out bpb {s}": metrics.get(f"bpb_{s}_after_lapt", metrics.get(f"bpb_{s}_zero_shot"))
                for s in ("target", "source")}
        expected[run.data.params["method"]] = own
    return {model: {column: figure(value) for column, value in row.items()} for model, row in expected.items()}


def expected_gates(client, name: str, version: int):
    """The gates decided from what the store holds: the version's metrics (its run's, then its parent's), the
    per-item parts of both runs' gates/items.json, the gates recorded on the version (else the defaults)."""
    from vocadapt.components.evaluation.bootstrap import parts_from_json
    from vocadapt.platform.registry.gates import PromotionGates, evaluate_gates

    model_version = client.get_model_version(name, str(version))
    run = client.get_run(model_version.run_id)
    parent = client.get_run(run.data.tags["mlflow.parentRunId"])
    metrics = {**parent.data.metrics, **run.data.metrics}
    items = {}
    for run_id in (parent.info.run_id, run.info.run_id):
        path = client.download_artifacts(run_id, "gates/items.json")
        items |= {key: parts_from_json(entry) for key, entry in json.loads(Path(path).read_text())["items"].items()}
    recorded = model_version.tags.get("vocadapt.promotion_gates")
    gates = PromotionGates.model_validate_json(recorded) if recorded else PromotionGates()
    return metrics, evaluate_gates(metrics, gates, model_version.tags.get("vocadapt.target_language", "it"), items)


def _shot(driver, name: str) -> None:
    folder = os.environ.get("VOCADAPT_SCREENSHOTS")
    if folder:
        time.sleep(3)  # let the charts finish drawing
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(folder) / name))


def test_every_figure_of_the_adapt_run_beside_the_source_models(store, dashboard, browser):
    _, _, _, parent, methods, _, _ = store
    run_name = parent.info.run_name
    browser.get(dashboard)
    _wait_for(browser, ["Side by side with the source model", "Registered models", "Energy and CO2"])
    rows = {row["measure"]: row for row in _table_with(browser, "measure", f"{run_name}: source model")}
    expected = expected_side_by_side(parent, methods)
    assert {column for column in next(iter(rows.values())) if column != "measure"} == \
        {f"{run_name}: {model}" for model in expected}
    assert set(rows) == {measure for figures in expected.values() for measure in figures}
    for model, figures in expected.items():
        for measure, text in figures.items():
            assert rows[measure][f"{run_name}: {model}"] == text, (model, measure)
    # the gated measures are all there, for the source model and every method
    for measure in ("bpb_ood_target", "bpb_ood_source", "tokens_per_character", "parameters total",
                    "held-out bpb target"):
        assert all(text != "-" for column, text in rows[measure].items() if column != "measure"), measure
    page = browser.page_source
    for empty in ("No fertility", "No bits-per-byte", "No training curves", "No side-by-side", "No energy",
                  "No corpus expectation", "No registered models", "Traceback"):
        assert empty not in page, empty
    _shot(browser, "dashboard-runs.png")


def test_promotion_view_shows_every_gate_and_the_alias_history(store, dashboard, browser):
    client, _, _, _, _, name, version = store
    browser.get(dashboard)
    _wait_for(browser, ["Side by side with the source model"])
    _choose_view(browser, "Promotion")
    _wait_for(browser, [f"{name} version {version}: gates against the source model", "alias history"])
    metrics, results = expected_gates(client, name, version)
    rows = {row["gate"]: row for row in _table_with(browser, "gate", "verdict")}
    assert set(rows) == {result.gate for result in results}
    for result in results:
        row = rows[result.gate]
        assert row["measured"] == figure(result.measured) and row["source"] == figure(result.reference), row
        assert row["difference"] == figure(result.difference) and row["bound"] == figure(result.bound), row
        assert row["margin"] == (result.margin or "-") and row["verdict"] == result.verdict, row
        assert row["95% interval"] == (f"[{figure(result.interval.low)}, {figure(result.interval.high)}]"
                                       if result.interval else "no interval"), row
    # the measured and source values are the logged metrics themselves
    assert rows["target bits per byte"]["measured"] == figure(metrics["bpb_ood_target"])
    assert rows["target bits per byte"]["source"] == figure(metrics["source_model.bpb_ood_target"])
    assert sum(1 for result in results if result.interval is not None) >= 5  # the paired bootstrap's intervals
    tags = client.get_model_version(name, str(version)).tags
    cells = [" ".join(row.values()) for row in _table_with(browser, "alias", "event")]
    assert any("promotion" in cell and tags["vocadapt.promotion.champion.decision"] in cell for cell in cells)
    model = client.get_registered_model(name)
    for alias, pointed in model.aliases.items():
        assert any(alias in cell and "now" in cell and str(pointed) in cell for cell in cells), (alias, cells)
    _shot(browser, "dashboard-promotion.png")


def test_family_fertility_view_draws_its_matrix(store, dashboard, browser):
    from selenium.webdriver.common.by import By

    from vocadapt.dashboards.family_fertility import matrix_path

    if matrix_path() is None:
        pytest.skip("no family fertility matrix committed or measured here")
    browser.get(dashboard)
    _wait_for(browser, ["Side by side with the source model"])
    _choose_view(browser, "Family fertility")
    _wait_for(browser, ["Fertility matrix", "Published figures beside the measured ones"])
    from selenium.webdriver.support.ui import WebDriverWait

    # the heat map is drawn (Vega renders into a canvas or an SVG inside the chart's element)
    WebDriverWait(browser, 60, poll_frequency=0.5).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "[data-testid='stVegaLiteChart'] canvas, "
                                                   "[data-testid='stVegaLiteChart'] svg"))
    _shot(browser, "dashboard-family-fertility.png")
