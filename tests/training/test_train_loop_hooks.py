"""The Ray LAPT tests' hooked train loop travels to Ray's workers by value: a worker that cannot import this
repository's ``tests`` package (a cluster started from another folder) still unpickles it. Once, a module-level
helper it referred to made every worker import ``tests.training.ray_lapt_world``, and the killed-worker test failed
with "No module named 'tests'" on a cluster another test module had started."""

from __future__ import annotations

import os
import subprocess
import sys


def test_the_hooked_train_loop_unpickles_where_the_tests_package_cannot_be_imported(tmp_path):
    from ray import cloudpickle

    from tests.training.ray_lapt_world import hooked_train_loop, kill_once

    loop = hooked_train_loop(kill_once(rank=0, step=3, marker=str(tmp_path / "marker")),
                             losses=str(tmp_path / "losses"))
    (tmp_path / "loop.pkl").write_bytes(cloudpickle.dumps(loop))
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    unpickled = subprocess.run(
        [sys.executable, "-c", "import pickle, sys; pickle.loads(open(sys.argv[1], 'rb').read())", "loop.pkl"],
        cwd=tmp_path, env=environment, capture_output=True, text=True)
    assert unpickled.returncode == 0, unpickled.stderr
