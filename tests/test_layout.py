"""The project's shape: one namespace, no shadowing of the standard library, the layering rule, a complete wheel."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PORTIONS = ("components", "platform", "pipelines", "dashboards")
EDGE_LIBRARIES = ("ray", "mlflow", "deepspeed", "streamlit", "great_expectations", "vllm")


def test_no_init_in_namespace_portions():
    for portion in PORTIONS:
        assert not (ROOT / portion / "__init__.py").exists(), f"{portion}/__init__.py must not exist"


def test_stdlib_platform_not_shadowed_from_repo_root():
    result = subprocess.run(
        [sys.executable, "-c", "import platform; print(platform.system())"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )
    assert result.stdout.strip() in {"Linux", "Darwin", "Windows"}


def test_components_never_import_edge_libraries():
    code = (
        "import importlib, pkgutil, sys\n"
        "import vocadapt.components as c\n"
        "for m in pkgutil.walk_packages(c.__path__, 'vocadapt.components.'):\n"
        "    importlib.import_module(m.name)\n"
        f"bad = [n for n in {EDGE_LIBRARIES!r} if n in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "", f"components import edge libraries: {result.stdout.strip()}"


def test_every_module_imports():
    failures = []
    for portion in ("components", "platform", "pipelines"):
        package = importlib.import_module(f"vocadapt.{portion}")
        for module in pkgutil.walk_packages(package.__path__, f"vocadapt.{portion}."):
            try:
                importlib.import_module(module.name)
            except Exception as error:  # noqa: BLE001 - collect them all
                failures.append(f"{module.name}: {error!r}")
    assert not failures, "\n".join(failures)


@pytest.mark.timeout(600)
def test_wheel_contains_every_module(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True, capture_output=True,
    )
    wheel = next(tmp_path.glob("vocadapt-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        f"vocadapt/{portion}/{path.relative_to(ROOT / portion).as_posix()}"
        for portion in PORTIONS
        for path in (ROOT / portion).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    missing = expected - names
    assert not missing, f"wheel lacks {sorted(missing)[:10]}"
    assert "vocadapt/platform/__init__.py" not in names
