"""The README's screenshots of the dashboard: runs the browser test (a tiny real adapt run tracked by a real MLflow
server, its candidate promoted with the default gates, the dashboard opened in Debian's headless Chromium through
Selenium) with ``VOCADAPT_SCREENSHOTS`` set, so each view it checks is saved as a PNG.

    python benchmarks/dashboard_screenshots.py [--out docs/images]

Writes ``dashboard-runs.png`` (the runs view: the side-by-side section first) and ``dashboard-promotion.png`` (the
gates and the alias history). Needs chromium and chromium-driver (apt-get install chromium chromium-driver).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    env = {**os.environ, "VOCADAPT_SCREENSHOTS": str(args.out.resolve()), "VOCADAPT_REQUIRE_BROWSER": "1"}
    test = ROOT / "tests" / "dashboard" / "test_browser.py"
    completed = subprocess.run([sys.executable, "-m", "pytest", "-q", str(test)], cwd=ROOT, env=env)
    for name in ("dashboard-runs.png", "dashboard-promotion.png", "dashboard-family-fertility.png"):
        path = args.out / name
        print(f"{path}: {path.stat().st_size:,} bytes" if path.is_file() else f"{path}: not written")
    sys.exit(completed.returncode)


if __name__ == "__main__":
    main()
