"""The multi-node node-loss test (test_multinode.py) in a fresh pytest process, so no Ray state of the suite's
earlier modules (in-process clusters, Ray Train's controller bookkeeping) reaches the cluster it starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.training.test_multinode import DRIVER_ENV, IN_OWN_PROCESS

ROOT = Path(__file__).resolve().parents[2]


# The child gets this process's environment, but not the Ray settings an earlier module's local ray.init() left in
# it (RAY_AUTH_MODE=token): its driver runs in its nodes' authentication mode (DRIVER_ENV in test_multinode.py).
@pytest.mark.timeout(900)
def test_multinode_node_loss_in_its_own_process(tmp_path):
    env = {**os.environ, IN_OWN_PROCESS: "1", **DRIVER_ENV}
    env.pop("RAY_ADDRESS", None)
    # a fresh temporary root: the driver would otherwise find /tmp/ray/session_latest of an earlier module's cluster
    (tmp_path / "tmp").mkdir()
    env["TMPDIR"] = env["RAY_TMPDIR"] = str(tmp_path / "tmp")
    completed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly",
                                "tests/training/test_multinode.py"], cwd=ROOT, env=env, capture_output=True,
                               text=True, timeout=850)
    assert completed.returncode == 0, completed.stdout[-6000:] + completed.stderr[-3000:]
    assert " passed" in completed.stdout and "skipped" not in completed.stdout.splitlines()[-1]
