"""The README's screenshots of the dashboard: runs the browser test (a tiny real adapt run tracked by a real MLflow
server, its candidate promoted with the default gates, the dashboard opened in Debian's headless Chromium through
Selenium) with ``VOCADAPT_SCREENSHOTS`` set, so each view it checks is saved as a PNG.

    python benchmarks/dashboard_screenshots.py [--out docs/images]
    python benchmarks/dashboard_screenshots.py --tracking-uri sqlite:///PATH/mlflow.db --experiment italian-smollm2-expand

Without ``--tracking-uri`` it writes ``dashboard-runs.png`` (the runs view: the side-by-side section first) and ``dashboard-promotion.png`` (the
gates and the alias history). Needs chromium and chromium-driver (apt-get install chromium chromium-driver).
With ``--tracking-uri`` (for example the store a ``make demo`` wrote) it opens the dashboard on that store instead
and saves the same two views of its runs, ``--prefix`` before each name (default ``demo-``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import shutil
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    parser.add_argument("--tracking-uri", help="screenshot the dashboard on this MLflow store instead of the test's")
    parser.add_argument("--experiment", help="the experiment selected at start (with --tracking-uri)")
    parser.add_argument("--prefix", default="demo-", help="file name prefix (with --tracking-uri)")
    args = parser.parse_args()
    if args.tracking_uri:
        sys.exit(screenshot_store(args.tracking_uri, args.experiment, args.out, args.prefix))
    env = {**os.environ, "VOCADAPT_SCREENSHOTS": str(args.out.resolve()), "VOCADAPT_REQUIRE_BROWSER": "1"}
    test = ROOT / "tests" / "dashboard" / "test_browser.py"
    completed = subprocess.run([sys.executable, "-m", "pytest", "-q", str(test)], cwd=ROOT, env=env)
    for name in ("dashboard-runs.png", "dashboard-promotion.png", "dashboard-family-fertility.png"):
        path = args.out / name
        print(f"{path}: {path.stat().st_size:,} bytes" if path.is_file() else f"{path}: not written")
    sys.exit(completed.returncode)


# (view in the sidebar, a text the view shows once drawn, file name)
STORE_VIEWS = (("MLflow runs", "Side by side with the source model", "dashboard-runs.png"),
               ("Promotion", "gates against the source model", "dashboard-promotion.png"))


def screenshot_store(tracking_uri: str, experiment: str | None, out: Path, prefix: str) -> int:
    """`vocadapt dashboard` on ``tracking_uri`` in headless Chromium: each of ``STORE_VIEWS`` saved as a PNG."""
    import requests
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    from vocadapt.platform.evaluation.serving import free_port

    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    command = [str(Path(sys.executable).parent / "vocadapt"), "dashboard", "--tracking-uri", tracking_uri,
               "--port", str(port)] + (["--experiment", experiment] if experiment else [])
    # its own process group: `vocadapt dashboard` runs streamlit as a child, and both stop at the end
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1500,4200"):
        options.add_argument(argument)
    driver = None
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if requests.get(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).text == "ok":
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                print("the dashboard did not start", file=sys.stderr)
                return 1
            time.sleep(0.5)
        driver = webdriver.Chrome(service=Service(executable_path=shutil.which("chromedriver")), options=options)
        driver.get(f"http://127.0.0.1:{port}")
        for view, shown, name in STORE_VIEWS:
            option = (By.XPATH, f"//label[.//p[normalize-space(text())='{view}']]")
            WebDriverWait(driver, 180, 0.5).until(expected_conditions.element_to_be_clickable(option))
            driver.find_element(*option).click()
            WebDriverWait(driver, 300, 0.5).until(lambda d: shown in d.page_source)
            time.sleep(8)  # the charts draw after the text
            path = out / f"{prefix}{name}"
            driver.save_screenshot(str(path))
            print(f"{path}: {path.stat().st_size:,} bytes")
        return 0
    finally:
        if driver is not None:
            driver.quit()
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


if __name__ == "__main__":
    main()
