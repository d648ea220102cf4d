"""A multi-node Ray cluster on one machine loses a node in the middle of LAPT, and the run resumes.

A head and two worker nodes are started with ``ray start`` (separate processes, node ids and temp folders); each
worker node offers one ``vocadapt_lapt_node`` resource, so the two LAPT workers (DeepSpeed ZeRO-2 on gloo) land on
different nodes. Checkpoints go to a real S3 endpoint (moto's server) and metrics to a real MLflow server over
HTTP. After the step-2 checkpoint is registered, rank 1's node is killed whole (its ``ray start`` process group:
raylet and workers); a replacement node is started, Ray Train restarts the group there and every worker resumes
from the step-2 checkpoint in the bucket. The resumed run's curve is the first attempt's where the two overlap: steps
1-2 carried in the checkpoint and step 3 computed again to the same loss (the same weights and data position: step
3's loss is computed before its update, so the optimizer state and schedule restored are test_ray_lapt.py's to check,
where a killed run's steps 4-6 match an uninterrupted run's), and the one MLflow run holds each step once. ``infra/README.md`` shows the same steps on a real cluster.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.local_server import log_tail
from tests.mlflow_server import free_port, mlflow_server
from tests.s3_server import object_keys, s3_server
from tests.training.lapt_tiny_world import ITALIAN
from tests.training.ray_lapt_world import (hooked_train_loop, lapt_inputs, lapt_settings, losses_by_attempt,
                                            write_lapt_world)

# Runs in its own pytest process (tests/training/test_multinode_process.py starts it with this variable set), so
# no Ray session of the suite's earlier modules is in the process that drives this cluster.
IN_OWN_PROCESS = "VOCADAPT_MULTINODE_PROCESS"
pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(os.environ.get(IN_OWN_PROCESS) != "1",
                                 reason="run by test_multinode_process.py in its own process")]

BIN = Path(sys.executable).parent
BUCKET = "vocadapt"
NODE_RESOURCE = "vocadapt_lapt_node"
# The authentication mode of the nodes and of this driver, set explicitly rather than inherited: a local
# `ray.init()` (an earlier test's cluster in the process that starts this one) leaves RAY_AUTH_MODE=token in its
# environment for good; a driver in token mode on these nodes rejects their untokened calls ("Missing authorization
# header in request!"), so the GCS takes the driver for dead and cancels Ray Train's controller before it starts.
# Ray reads the mode once per process, so test_multinode_process.py puts it in this process's environment.
DRIVER_ENV = {"RAY_AUTH_MODE": "disabled"}


class Cluster:
    """``ray start`` processes, each in its own process group (ended by killing that group: ``ray stop`` would end
    every Ray instance on the machine, others' too)."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.port, self.nodes = folder, free_port(), {}
        # Token authentication off: the nodes are this test's own, on one machine (Ray 2.59+ turns it on by default
        # and a worker node started by `ray start --address` does not send the head's token unless told to). The
        # driver must use the same mode (DRIVER_ENV, checked by the `cluster` fixture). Ray's memory monitor off: it
        # reads the whole machine's memory, and on a shared machine it killed these tiny workers for what other
        # processes used (22.75 of 23.54 GB, seen once).
        self.env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0",
                    "PYTHONPATH": str(Path(__file__).resolve().parents[2]), **DRIVER_ENV,
                    "RAY_memory_monitor_refresh_ms": "0",
                    "PYTHONUNBUFFERED": "1"}  # start_head reads the head's log as it is written
        self.env.pop("RAY_ADDRESS", None)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, name: str, *args: str) -> None:
        temp = Path("/tmp") / f"vm{os.getpid()}{name}"  # short: Ray's socket paths must fit in 107 bytes
        where = ["--head", "--port", str(self.port), "--include-dashboard", "false"] if name == "head" else [
            "--address", self.address]
        log = open(self.folder / f"{name}.log", "w")
        process = subprocess.Popen(
            [str(BIN / "ray"), "start", "--block", "--node-ip-address", "127.0.0.1", "--temp-dir", str(temp),
             "--disable-usage-stats", *where, *args],
            env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.nodes[name] = (process, log, temp)

    def start_head(self, *args: str, attempts: int = 3, timeout: float = 90) -> None:
        """The head, on a fresh port each time, up to ``attempts`` times: a port ``free_port`` handed out can be
        taken by another process before Ray binds it, and ``ray start`` then exits ("Failed to start the grpc
        server"; tests/platform/test_ray_jobs_live.py met it in CI). Up once its log says "Ray runtime started";
        the Ray client server's port is named too (its default, 10001, is every head's default on the machine)."""
        problems = []
        for attempt in range(attempts):
            self.start("head", "--ray-client-server-port", str(free_port()), *args)
            process, _, _ = self.nodes["head"]
            log_path, deadline = self.folder / "head.log", time.time() + timeout
            while process.poll() is None and time.time() < deadline:
                if "Ray runtime started" in log_path.read_text(errors="replace"):
                    return
                time.sleep(0.5)
            state = f"exited with {process.returncode}" if process.poll() is not None else f"not up after {timeout} s"
            problems.append(f"attempt {attempt + 1} (port {self.port}): ray start --head {state}\n{log_tail(log_path)}")
            self.kill("head")
            self.port = free_port()
        pytest.fail("no Ray head came up:\n" + "\n\n".join(problems))

    def start_worker(self, name: str) -> None:
        self.start(name, "--num-cpus", "1", "--resources", json.dumps({NODE_RESOURCE: 1, f"node_{name}": 1}))

    def kill(self, name: str) -> None:
        process, log, temp = self.nodes.pop(name)
        for sig in (signal.SIGKILL,):  # a node lost, not a node shut down
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                pass
        process.wait()
        log.close()
        shutil.rmtree(temp, ignore_errors=True)

    def node_of(self, name: str) -> str:
        import ray

        return next(n["NodeID"] for n in ray.nodes() if n["Alive"] and f"node_{name}" in n["Resources"])

    def wait_for(self, names: list[str], timeout: float = 120) -> None:
        import ray

        deadline = time.time() + timeout
        while time.time() < deadline:
            alive = {key for n in ray.nodes() if n["Alive"] for key in n["Resources"]}
            if all(f"node_{name}" in alive for name in names):
                return
            for name, (process, _, _) in self.nodes.items():
                assert process.poll() is None, f"ray start for {name} exited: {(self.folder / f'{name}.log').read_text()}"
            time.sleep(0.5)
        pytest.fail(f"nodes {names} did not join in {timeout} s")

    def stop(self) -> None:
        """Every node asked to stop, a second's grace, then each process group killed (all nodes at once)."""
        nodes = [self.nodes.pop(name) for name in list(self.nodes)]
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for process, _, _ in nodes:
                try:
                    os.killpg(process.pid, sig)
                except ProcessLookupError:
                    pass
            time.sleep(1)
        for process, log, temp in nodes:
            process.wait()
            log.close()
            shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    """The S3 endpoint and the MLflow server (started before the nodes, which inherit the AWS variables)."""
    folder = tmp_path_factory.mktemp("services")
    with s3_server(folder, buckets=(BUCKET,)) as endpoint, mlflow_server(folder) as tracking_uri:
        yield endpoint, tracking_uri


@pytest.fixture(scope="module")
def cluster(services, tmp_path_factory):
    import ray

    for name, value in DRIVER_ENV.items():
        if os.environ.get(name, value) != value:
            pytest.fail(f"{name}={os.environ[name]} in this process, {value} on the nodes: the driver would reject "
                        "the nodes' calls; run it through test_multinode_process.py")
    nodes = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        nodes.start_head("--num-cpus", "1")
        nodes.start_worker("a")
        nodes.start_worker("b")
        ray.init(address=nodes.address, include_dashboard=False, log_to_driver=False)
        nodes.wait_for(["a", "b"])
        yield nodes
    finally:
        ray.shutdown()
        nodes.stop()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return write_lapt_world(tmp_path_factory.mktemp("multinode-world"))


def _plan(world: Path, name: str, tracking_uri: str, run_id: str):
    from vocadapt.platform.lapt.ray_train import plan_lapt

    settings = lapt_settings(eval_every=6, max_failures=2, deepspeed={"enabled": True, "zero_stage": 2})
    return plan_lapt(world / "model", world / "model", settings, **lapt_inputs(
        world, name, eval_documents={"target": ITALIAN[:2]}, storage_path=f"s3://{BUCKET}/multinode",
        tracking_uri=tracking_uri, mlflow_run_id=run_id, worker_resources={NODE_RESOURCE: 1}))


def _record_attempt(attempts: str):
    """An ``on_start`` hook: each worker appends its rank, node and the checkpoint it starts from to ``attempts``."""

    def on_start() -> None:
        import json

        import ray
        import ray.train

        checkpoint = ray.train.get_checkpoint()
        with open(attempts, "a", encoding="utf-8") as log:
            log.write(json.dumps({"rank": ray.train.get_context().get_world_rank(),
                                  "node": ray.get_runtime_context().get_node_id(),
                                  "checkpoint": checkpoint.path if checkpoint else None}) + "\n")

    return on_start


def _stall_once(doomed: str, run_uri: str):
    """An ``after_step`` hook: rank 1, after step 3 of the first attempt, waits until the controller has registered
    the step-2 checkpoint (its snapshot in the bucket names it), writes ``doomed`` with its node id and sleeps until
    its node is killed."""

    def after_step(done: int) -> None:
        import time
        from pathlib import Path

        import ray
        import ray.train

        from vocadapt.platform.data.storage import locate

        if ray.train.get_context().get_world_rank() == 1 and done == 3 and not Path(doomed).exists():
            snapshot = locate(run_uri) / "checkpoint_manager_snapshot.json"
            for _ in range(600):
                if snapshot.is_file() and "step-000002" in snapshot.read_text():
                    break
                time.sleep(0.2)
            Path(doomed).write_text(ray.get_runtime_context().get_node_id(), encoding="utf-8")
            time.sleep(300)  # the test kills this node

    return after_step


def _kill_the_doomed_node(cluster: Cluster, doomed: Path, killed: list[str]) -> threading.Thread:
    """In the background: when ``doomed`` appears, kill the node it names and start a replacement node."""

    def watch() -> None:
        for _ in range(3000):
            if doomed.exists() and doomed.read_text(encoding="utf-8"):
                node = doomed.read_text(encoding="utf-8")
                name = next(n for n in ("a", "b") if n in cluster.nodes and cluster.node_of(n) == node)
                cluster.kill(name)
                killed.append(name)
                cluster.start_worker("c")
                return
            time.sleep(0.2)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_lapt_survives_losing_a_node_and_resumes_from_the_s3_checkpoint(services, cluster, world, tmp_path):
    from mlflow.tracking import MlflowClient

    from vocadapt.platform.lapt.ray_train import fit_lapt

    endpoint, tracking_uri = services
    client = MlflowClient(tracking_uri)
    experiment = client.create_experiment("multinode")
    run_id = client.create_run(experiment).info.run_id
    attempts, doomed, killed = tmp_path / "attempts.jsonl", tmp_path / "doomed", []
    losses = tmp_path / "losses.jsonl"
    watcher = _kill_the_doomed_node(cluster, doomed, killed)
    plan = _plan(world, "node-lost", tracking_uri, run_id)
    train_loop = hooked_train_loop(_stall_once(str(doomed), f"s3://{BUCKET}/multinode/node-lost"),
                                   on_start=_record_attempt(str(attempts)), losses=str(losses))
    resumed = fit_lapt(train_loop, plan)
    watcher.join(timeout=5)

    records = [json.loads(line) for line in attempts.read_text(encoding="utf-8").splitlines()]
    first, second = records[:2], records[2:]
    assert killed and len(second) == 2, records
    assert len({r["node"] for r in first}) == 2  # the two workers ran on two nodes
    lost = doomed.read_text(encoding="utf-8")
    assert lost in {r["node"] for r in first} and lost not in {r["node"] for r in second}
    assert all(r["checkpoint"] is None for r in first)
    # resumed from the step-2 checkpoint, read from the bucket (a path on the S3 filesystem, not a local folder)
    assert all(r["checkpoint"] == f"{BUCKET}/multinode/node-lost/step-000002" for r in second), second

    curve = dict(resumed.series("loss"))
    assert list(curve) == [1, 2, 3, 4, 5, 6]
    before, after = losses_by_attempt(losses)
    assert list(before) == [1, 2, 3] and list(after) == [3, 4, 5, 6], (before, after)
    # steps 1-2 come from the checkpoint as the first attempt logged them; step 3, computed again from the step-2
    # checkpoint on a new node, is the loss the first attempt had at step 3 (on gloo, in float32, to 1e-5)
    assert [curve[step] for step in (1, 2)] == pytest.approx([before[1], before[2]], abs=1e-5)
    assert after[3] == pytest.approx(before[3], abs=1e-5)
    assert [curve[step] for step in (3, 4, 5, 6)] == pytest.approx([after[step] for step in (3, 4, 5, 6)], abs=1e-5)
    logged = [m.step for m in client.get_metric_history(run_id, "lapt_loss")]
    assert sorted(logged) == [1, 2, 3, 4, 5, 6]  # one MLflow run, no step twice
    for metric in client.get_metric_history(run_id, "lapt_loss"):
        assert metric.value == pytest.approx(curve[metric.step], abs=1e-5)
    keys = object_keys(endpoint, BUCKET, "multinode/node-lost/")  # the newest checkpoints are kept, in the bucket
    assert any(re.search(r"/step-\d{6}/", key) for key in keys) and any("/final/model/" in key for key in keys), keys
