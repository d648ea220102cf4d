"""Maps the five top-level folders (components, platform, pipelines, cli, dashboards) onto one import namespace, ``vocadapt``.

``components/`` imports as ``vocadapt.components`` and so on. The folders are namespace portions: none of them has
an ``__init__.py`` (a ``platform/__init__.py`` would shadow the standard library's ``platform`` module for anything
run from the repository root).
"""

from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).parent
PORTIONS = ("components", "platform", "pipelines", "cli", "dashboards")


def _packages() -> list[str]:
    names = []
    for portion in PORTIONS:
        for folder in [ROOT / portion, *sorted(p for p in (ROOT / portion).rglob("*") if p.is_dir())]:
            if "__pycache__" in folder.parts or not any(folder.glob("*.py")) and folder != ROOT / portion:
                continue
            relative = folder.relative_to(ROOT / portion).parts
            names.append(".".join(("vocadapt", portion, *relative)))
    return names


setup(
    packages=_packages(),
    package_dir={f"vocadapt.{portion}": portion for portion in PORTIONS},
    package_data={f"vocadapt.{portion}": ["**/*.yaml", "**/*.json", "**/*.md"] for portion in PORTIONS},
    include_package_data=True,
)
