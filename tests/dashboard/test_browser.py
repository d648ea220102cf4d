"""The dashboard served by `vocadapt dashboard`'s command line on 127.0.0.1, opened in a real headless Chromium:
the page shows the comparison (run and method names, sections) and the screenshot is not blank."""

from __future__ import annotations

import subprocess
import time

import pytest
import requests

from tests.dashboard.browser import HeadlessChromium, browser_available
from tests.dashboard.fake_store import (
    ADAPT_RUN, CHECKED_CORPORA, EVALUATION_RUN, EXPECTATIONS, METHODS, REGISTERED,
)

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not browser_available(), reason="needs Debian's chromium and chromium-driver"),
]


@pytest.fixture()
def served_dashboard(filled_store, tmp_path):
    from vocadapt.cli.commands.dashboard import dashboard_command_line, dashboard_environment
    from vocadapt.platform.evaluation.serving import free_port

    port = free_port()
    log = open(tmp_path / "streamlit.log", "wb")
    process = subprocess.Popen(dashboard_command_line(port), env=dashboard_environment(filled_store, None),
                               stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert process.poll() is None, (tmp_path / "streamlit.log").read_text()[-2000:]
            try:
                if requests.get(f"{url}/_stcore/health", timeout=2).text == "ok":
                    break
            except requests.RequestException:
                pass
            time.sleep(0.5)
        else:
            raise TimeoutError("streamlit did not answer /_stcore/health in 90 s")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def energy_texts() -> list[str]:
    """The energy section's figures as the page shows them: each run's total in Wh and g CO2eq, a stage's Wh."""
    from tests.dashboard.fake_store import ENERGY_COUNTRY, GRID_KG_PER_KWH, METHOD_KWH, expected_energy_kwh

    totals = [text for kwh in expected_energy_kwh().values()  # the page source has tags around the figures
              for text in (f"{kwh * 1000:.4g} Wh", f"{kwh * GRID_KG_PER_KWH * 1000:.4g} g CO2eq")]
    return ["Energy and CO2", f"on the {ENERGY_COUNTRY} grid", *totals, f"{METHOD_KWH['lapt'] * 1000:.4g}"]


def test_dashboard_in_headless_chromium(served_dashboard, tmp_path):
    from PIL import Image

    with HeadlessChromium(width=1400, height=5200) as browser:
        browser.open(served_dashboard)
        evaluated = len(CHECKED_CORPORA) * len(EXPECTATIONS)
        expected = [ADAPT_RUN, *(f"{ADAPT_RUN}/{m}" for m in METHODS), EVALUATION_RUN, REGISTERED,
                    "Best per column", "Registered models", "Embedding similarity", "1.50x", "lapt_loss",
                    # the corpus expectation section: the count and every corpus and expectation, as table text
                    "Corpus expectations", f"{evaluated} of {evaluated} expectations met", *CHECKED_CORPORA,
                    *EXPECTATIONS, "share of lines labelled en"]
        expected += energy_texts()
        dom = browser.wait_for_text(expected)
        time.sleep(2)  # let the charts finish drawing
        shot = browser.screenshot(tmp_path / "dashboard.png")
    assert "Traceback" not in dom and "stException" not in dom
    image = Image.open(shot).convert("RGB")
    assert image.size[0] == 1400
    colours = image.resize((200, 700)).getcolors(maxcolors=200 * 700)
    assert len(colours) > 200, "the page looks blank"
    # the charts put saturated colour on the page, not only text
    saturated = sum(count for count, (r, g, b) in colours if max(r, g, b) - min(r, g, b) > 80)
    assert saturated > 500, "no chart colours in the screenshot"
