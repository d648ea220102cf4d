"""Drive Debian's headless Chromium through chromedriver's WebDriver HTTP protocol (no selenium, no playwright):
open a page, wait until its DOM contains given text, take a screenshot."""

from __future__ import annotations

import base64
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import requests

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
]


def browser_available() -> bool:
    return bool(shutil.which("chromium") and shutil.which("chromedriver"))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class HeadlessChromium:
    def __init__(self, width: int = 1400, height: int = 3000) -> None:
        self.width, self.height = width, height

    def __enter__(self) -> HeadlessChromium:
        self.profile = tempfile.mkdtemp(prefix="chromium-profile-")
        port = _free_port()
        self.driver = subprocess.Popen([shutil.which("chromedriver"), f"--port={port}"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{port}"
        _wait(lambda: requests.get(f"{self.base}/status", timeout=2).json()["value"]["ready"], 30, "chromedriver")
        options = {"binary": shutil.which("chromium"),
                   "args": [*CHROMIUM_ARGS, f"--user-data-dir={self.profile}",
                            f"--window-size={self.width},{self.height}"]}
        reply = requests.post(f"{self.base}/session", json={"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "goog:chromeOptions": options}}}, timeout=60).json()
        self.session = f"{self.base}/session/{reply['value']['sessionId']}"
        return self

    def open(self, url: str) -> None:
        requests.post(f"{self.session}/url", json={"url": url}, timeout=60).raise_for_status()

    def dom(self) -> str:
        return requests.get(f"{self.session}/source", timeout=30).json()["value"]

    def wait_for_text(self, texts: list[str], timeout_s: float = 90) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            dom = self.dom()
            if all(text in dom for text in texts):
                return dom
            time.sleep(0.5)
        missing = [text for text in texts if text not in self.dom()]
        raise AssertionError(f"the page never showed {missing}")

    def screenshot(self, path: Path) -> Path:
        data = requests.get(f"{self.session}/screenshot", timeout=60).json()["value"]
        path.write_bytes(base64.b64decode(data))
        return path

    def __exit__(self, *exc) -> None:
        try:
            requests.delete(self.session, timeout=30)
        finally:
            self.driver.terminate()
            self.driver.wait(timeout=30)
            shutil.rmtree(self.profile, ignore_errors=True)


def _wait(check, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (requests.RequestException, KeyError, ValueError):
            pass
        time.sleep(0.3)
    raise TimeoutError(f"{what} did not start in {timeout_s} s")
