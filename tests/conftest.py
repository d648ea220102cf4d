"""Shared fixtures: the committed corpus slices, and the real embedded default (built once per machine)."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# Ray Train's controller polls its workers every 2 s by default: a fit notices its workers' reports, the end of
# training and a failure up to that late. The suite runs dozens of fits of a few steps, so its controllers poll
# every 0.5 s (inherited by the clusters, CLI runs and Ray workers that tests start). The two Ray LAPT files alone:
# 132 s at 2 s, 124 s at 0.5 s (docs/benchmarks/test-suite.md).
os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.5")
# The venv's bin first on PATH, as an activated venv has it, for this process and every process a test starts (Ray
# workers included). DeepSpeed on CPU compiles its shared-memory op with whichever `ninja` PATH finds, into
# ~/.cache/torch_extensions. The venv's ninja (1.13, a DeepSpeed dependency) and Debian's (1.11) keep their build
# logs differently, so each one took the other's build for stale and compiled the op again (about 50 CPU-s): the
# multi-node test's nodes put the venv's bin first, the suite's own Ray workers did not.
_VENV_BIN = str(Path(sys.executable).parent)
if os.environ.get("PATH", "").split(os.pathsep)[0] != _VENV_BIN:
    os.environ["PATH"] = os.pathsep.join(filter(None, [_VENV_BIN, os.environ.get("PATH")]))
# And a build folder per venv: the op's build names the venv's paths, so the suites of two checkouts (a fresh clone
# beside a working one) took each other's build for stale and compiled it again, 25 to 75 s each time.
os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(
    Path.home() / ".cache" / "torch_extensions" / f"venv-{hashlib.sha256(sys.prefix.encode()).hexdigest()[:12]}"))

FIXTURE_CORPORA = Path(__file__).parent / "fixtures" / "corpora"


@pytest.fixture(scope="module", autouse=True)
def no_ray_session_left_to_the_next_module():
    """Each test module ends with no Ray session in this process: a module that starts a cluster (a fixture, or a
    command run in process that calls ``ray.init``) would otherwise leave it to the next module in the same pytest
    worker, with another module's folder, environment (S3 variables, authentication mode) and train-loop imports,
    whose workers then fail or wait for CPUs that cluster holds."""
    yield
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


@pytest.fixture(scope="session", autouse=True)
def mlflow_stores_seeded():
    """New MLflow SQLite stores this process opens start from a migrated empty store (tests/mlflow_store_seed.py)."""
    from tests.mlflow_store_seed import install

    install()


@pytest.fixture(autouse=True)
def main_module_and_tracking_uri_kept():
    """``sys.modules["__main__"]`` and ``MLFLOW_TRACKING_URI`` as they were before each test. Streamlit's script
    runner (the dashboard tests' ``AppTest``) installs the app as ``__main__`` and leaves it there, and
    ``mlflow.set_tracking_uri`` exports the variable for child processes and leaves it there; a later test in the
    same worker that starts processes with multiprocessing's spawn (``torch.multiprocessing.spawn``, DDP) then ran
    the dashboard in every child, against a test's MLflow server that was gone, and the children exited 1 (a
    fresh-clone run of be3ac4b: ``test_ddp_accumulation``)."""
    main, uri = sys.modules.get("__main__"), os.environ.get("MLFLOW_TRACKING_URI")
    yield
    if main is not None and sys.modules.get("__main__") is not main:
        sys.modules["__main__"] = main
    if uri is None:
        os.environ.pop("MLFLOW_TRACKING_URI", None)
    else:
        os.environ["MLFLOW_TRACKING_URI"] = uri


@pytest.fixture(scope="session")
def fixture_corpora() -> dict[str, Path]:
    """Small committed slices of the embedded corpora (see fixtures/corpora/ATTRIBUTION.md), by name:
    ``it.train``, ``it.validation``, ``en.train``, ``en.validation`` (text, one document per line, 400 / 150 lines,
    line-aligned across languages) and ``it-en.train``, ``it-en.validation`` (jsonl pairs); for non-Latin scripts
    ``hi.*``, ``ja.*``, ``km.*`` (300 / 100 lines) with ``hi-en.*``, ``ja-en.*``, ``km-en.*`` pairs."""
    files = {path.name.rsplit(".", 1)[0]: path for path in sorted(FIXTURE_CORPORA.glob("*.txt"))}
    files.update({path.name.rsplit(".", 1)[0]: path for path in sorted(FIXTURE_CORPORA.glob("*.jsonl"))})
    return files


@pytest.fixture(scope="session")
def embedded_assets():
    """The real embedded default with Italian (``EmbeddedAssets``), under $VOCADAPT_HOME or ~/.cache/vocadapt.

    Built on first use (about a minute with network for the Debian packages, the Bible alone without); then instant.
    """
    from vocadapt.platform.assets.embedded import build_assets

    return build_assets(languages=("it",))


# Real parts CI must run rather than skip (.ci/run sets them all): a test skipped for want of one fails instead,
# naming the variable. Matched on the skip's reason, which every such test words this way.
REQUIRED_PARTS = {"VOCADAPT_REQUIRE_VLLM": "vllm serving environment", "VOCADAPT_REQUIRE_BROWSER": "chromium",
                  "VOCADAPT_REQUIRE_WORDLIST": "english word list", "VOCADAPT_REQUIRE_LLAMA_CPP": "llama-cpp-python",
                  "VOCADAPT_REQUIRE_TEST_TOKENIZERS": "no test tokenizer"}


def pytest_collection_modifyitems(items):
    """Mark the tests listed in tests/slow_tests.py `slow` (what `make test-fast` leaves out), and collect its
    LONGEST_FILES first, longest first (the rest keep their order)."""
    from tests.slow_tests import collection_rank, is_slow

    for item in items:
        if is_slow(item.nodeid):
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: collection_rank(item.nodeid))  # stable: a file's tests keep their order


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or not isinstance(report.longrepr, tuple):
        return
    reason = str(report.longrepr[2])
    for variable, part in REQUIRED_PARTS.items():
        if os.environ.get(variable) == "1" and part in reason.lower():
            report.outcome = "failed"
            report.longrepr = f"{reason}\n{variable}=1: this test must run here, not skip (build or install it first)"


@pytest.fixture(scope="session")
def tiny_adapt_over_http(tmp_path_factory, fixture_corpora):
    """One tiny `vocadapt adapt` tracked by a real MLflow server, shared by the tests that read what it logged
    (tests/pipelines/test_adapt_e2e.py, tests/dashboard/test_browser.py): (tracking URL, --json report, folder)."""
    from tests.pipelines.tiny_world import adapt_over_http

    corpora = {key: Path(path) for key, path in fixture_corpora.items()}
    with adapt_over_http(tmp_path_factory.mktemp("http-adapt"), corpora) as world:
        yield world
