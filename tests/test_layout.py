"""The project's shape: one namespace, no shadowing of the standard library, the layering rules, a complete wheel."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PORTIONS = ("components", "platform", "pipelines", "cli", "dashboards")
EDGE_LIBRARIES = ("ray", "mlflow", "deepspeed", "streamlit", "great_expectations", "vllm", "codecarbon")


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


# what each portion may import of the others: the command line sits above the pipelines, the pipelines above the
# edges (platform), the edges above the pure computation (components); the dashboard reads what the platform recorded
MAY_IMPORT = {
    "components": {"components"},
    "platform": {"components", "platform"},
    "pipelines": {"components", "platform", "pipelines"},
    "cli": {"components", "platform", "pipelines", "dashboards", "cli"},
    "dashboards": {"components", "platform", "dashboards"},
    "benchmarks": {"components", "platform", "pipelines"},  # they measure the library, never through the CLI
}


def _vocadapt_imports(path: Path) -> set[str]:
    """The portions of ``vocadapt`` a file imports anywhere in it (inside functions too, where heavy imports live)."""
    portions = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "vocadapt" and len(parts) > 1 and parts[1] in MAY_IMPORT:
                portions.add(parts[1])
    return portions


@pytest.mark.parametrize("portion", sorted(MAY_IMPORT))
def test_layering(portion):
    wrong = {
        str(path.relative_to(ROOT)): sorted(_vocadapt_imports(path) - MAY_IMPORT[portion])
        for path in sorted((ROOT / portion).rglob("*.py"))
    }
    wrong = {path: portions for path, portions in wrong.items() if portions}
    assert not wrong, f"{portion}/ may import only {sorted(MAY_IMPORT[portion])}: {wrong}"


def test_commands_never_import_each_other():
    """A command holds no library code another command needs: what two commands share lives below the CLI."""
    wrong = {}
    for path in sorted((ROOT / "cli" / "commands").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vocadapt.cli.commands"):
                wrong.setdefault(path.name, []).append(node.module)
    assert not wrong, f"commands importing other commands: {wrong}"


def _module_imports() -> dict[str, set[str]]:
    """Every vocadapt module -> the vocadapt modules it imports anywhere (inside functions too; not under
    ``if TYPE_CHECKING:``, which never runs). ``from package import module`` counts as importing the module."""
    modules = {}
    for portion in PORTIONS:
        for path in (ROOT / portion).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(("vocadapt", *(parts[:-1] if parts[-1] == "__init__" else parts)))] = path
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {id(node) for branch in ast.walk(tree) if isinstance(branch, ast.If)
                       and "TYPE_CHECKING" in ast.unparse(branch.test) for node in ast.walk(branch)}
        imported = set()
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                submodules = {f"{node.module}.{alias.name}" for alias in node.names} & modules.keys()
                imported |= submodules or {node.module}
        graph[name] = (imported & modules.keys()) - {name}
    return graph


def test_no_import_cycles():
    """No module reaches itself through its imports: each cycle is named by its modules."""
    graph, cycles, index, low, stack, on_stack = _module_imports(), [], {}, {}, [], set()

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph[module]:
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    assert not cycles, f"import cycles: {cycles}"


def test_layering_check_sees_function_level_imports(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from vocadapt.pipelines.adapt import run_adapt\n    import vocadapt.cli.app\n")
    assert _vocadapt_imports(module) == {"pipelines", "cli"}


def test_every_module_imports():
    failures = []
    for portion in ("components", "platform", "pipelines", "cli"):
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


def _module_exists(dotted: str) -> bool:
    """``vocadapt.<portion>.a.b`` is a file ``<portion>/a/b.py`` or a package folder ``<portion>/a/b/``."""
    parts = dotted.split(".")[1:]
    if not parts or parts[0] not in PORTIONS:
        return False
    path = ROOT.joinpath(*parts)
    return path.with_suffix(".py").is_file() or (path.is_dir() and (len(parts) == 1 or (path / "__init__.py").is_file()))


DOTTED_NAME = re.compile(r"^vocadapt\.(?:components|platform|pipelines|cli|dashboards)(?:\.\w+)+$")


def _dangling_references(path: Path) -> list[str]:
    """The vocadapt modules ``path`` names that do not exist: imports anywhere in it, and strings that spell a
    dotted name (``monkeypatch.setattr("vocadapt.platform.x.f", ...)``, ``python -m vocadapt...``) whose longest
    module prefix stops at the portion."""
    dangling = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            dangling += [alias.name for alias in node.names
                         if alias.name.startswith("vocadapt.") and not _module_exists(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("vocadapt."):
            if not _module_exists(node.module):
                dangling.append(node.module)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            for word in node.value.split():
                if DOTTED_NAME.match(word.strip("'\"`(),:")):
                    parts = word.strip("'\"`(),:").split(".")
                    if not any(_module_exists(".".join(parts[:end])) for end in range(3, len(parts) + 1)):
                        dangling.append(word)
    return dangling


def test_every_vocadapt_reference_names_a_module_that_exists():
    """Product code, tests and benchmarks: a moved or renamed module leaves no import (function-level ones, which
    only fail when they run, included) and no dotted string behind."""
    found = {}
    for folder in (*PORTIONS, "tests", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            if "__pycache__" not in path.parts and (dangling := _dangling_references(path)):
                found[str(path.relative_to(ROOT))] = dangling
    assert not found, f"references to modules that do not exist: {found}"


def test_dangling_reference_check_sees_function_level_imports_and_strings(tmp_path):
    missing, gone = "no_such_module", "gone"  # spelt apart, so that this file's own scan does not find them
    module = tmp_path / "m.py"
    module.write_text(f"def f(monkeypatch):\n    from vocadapt.platform.{missing} import x\n"
                      f"    monkeypatch.setattr('vocadapt.platform.{gone}.function', None)\n"
                      "    from vocadapt.platform.config import load_config\n")
    assert _dangling_references(module) == [f"vocadapt.platform.{missing}", f"vocadapt.platform.{gone}.function"]


# What every stage uses stays at platform/'s top level; anything else belongs to a concern's folder (DEVELOPERS.md).
PLATFORM_TOP_LEVEL = {"tracking", "model_loading", "energy", "jobs"}


def test_platform_is_grouped_by_concern():
    top_level = {path.stem for path in (ROOT / "platform").glob("*.py")}
    assert top_level <= PLATFORM_TOP_LEVEL, (
        f"{sorted(top_level - PLATFORM_TOP_LEVEL)} at platform/'s top level: move each into the folder of its "
        "concern (assets, data, families, lapt, evaluation, registry, serving, sweeps), or make the case for a new "
        "cross-cutting module in DEVELOPERS.md and PLATFORM_TOP_LEVEL")
    for folder in (path for path in (ROOT / "platform").iterdir() if path.is_dir() and path.name != "__pycache__"):
        assert (folder / "__init__.py").is_file(), f"platform/{folder.name}/ needs an __init__.py saying what it holds"


MAX_PIPELINE_PARAMETERS = 6


def _parameter_counts(path: Path) -> list[tuple[str, int]]:
    """(``file:line name``, parameters) of every function and method in ``path``, nested ones included: positional,
    keyword-only, ``*args`` and ``**kwargs`` (one each) count; a method's ``self`` or ``cls`` does not."""
    counts = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        arguments = node.args
        names = [argument.arg for argument in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
        count = len(names) - (names[:1] in (["self"], ["cls"])) + bool(arguments.vararg) + bool(arguments.kwarg)
        counts.append((f"{path.relative_to(path.parents[1])}:{node.lineno} {node.name}", count))
    return counts


def test_no_pipeline_function_takes_more_than_six_parameters():
    """A pipeline passes what belongs together as one object (the recipe, a settings dataclass), not value by
    value."""
    too_many = [f"{where} takes {count}" for path in sorted((ROOT / "pipelines").rglob("*.py"))
                for where, count in _parameter_counts(path) if count > MAX_PIPELINE_PARAMETERS]
    assert not too_many, f"more than {MAX_PIPELINE_PARAMETERS} parameters: {too_many}"


# Functions outside pipelines/ that still take more than six parameters, as "path name": this list only shrinks
# (a new one fails, and so does an entry that no longer takes more); regroup what belongs together into a small
# frozen dataclass or the settings object that already exists, then delete its line here.
PARAMETER_DEBT: set[str] = set()


def _registered_initializer(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any("register_initializer" in ast.unparse(decorator) for decorator in node.decorator_list)


def _too_many_parameters(root: Path, folders: tuple[str, ...]) -> dict[str, int]:
    """``path name`` -> parameters of every function in ``folders`` under ``root`` that takes more than six."""
    found = {}
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            exempt = {node.name for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _registered_initializer(node)}
            for where, count in _parameter_counts(path):
                if count > MAX_PIPELINE_PARAMETERS and where.split()[-1] not in exempt:
                    found[f"{path.relative_to(root).as_posix()} {where.split()[-1]}"] = count
    return found


def test_no_library_function_takes_more_than_six_parameters():
    """components/, platform/ and benchmarks/ pass what belongs together as one object, as pipelines/ do. The typer
    commands in cli/commands/ are exempt: they take one parameter per command-line option, build their request and
    call the pipeline. So are registered initialisers: their keyword-only parameters are the method's options, which
    the registry reads from the signature (DEVELOPERS.md, Seams)."""
    found = _too_many_parameters(ROOT, ("components", "platform", "benchmarks"))
    new = {where: count for where, count in found.items() if where not in PARAMETER_DEBT}
    assert not new, f"more than {MAX_PIPELINE_PARAMETERS} parameters: {new}; group what belongs together"
    paid = sorted(PARAMETER_DEBT - set(found))
    assert not paid, f"{paid} take at most {MAX_PIPELINE_PARAMETERS} parameters now: delete them from PARAMETER_DEBT"


def test_library_parameter_check_sees_a_seventh_parameter(tmp_path):
    module = tmp_path / "components" / "deep" / "m.py"
    module.parent.mkdir(parents=True)
    module.write_text("def six(a, b, c, *, d, e, f): pass\nclass C:\n    def seven(self, a, b, c, d, e, f, *g): pass\n"
                      "@register_initializer('m')\ndef method(problem, *, a, b, c, d, e, f, g): pass\n")
    assert _too_many_parameters(tmp_path, ("components",)) == {"components/deep/m.py seven": 7}


def test_parameter_count_sees_keyword_only_star_arguments_and_methods(tmp_path):
    module = tmp_path / "pipelines" / "m.py"
    module.parent.mkdir()
    module.write_text("def f(a, b, /, c, *args, d, **kwargs):\n    def g(x): pass\n"
                      "class C:\n    def m(self, a, *, b): pass\n    @classmethod\n    def k(cls): pass\n")
    counts = {where.split()[-1]: count for where, count in _parameter_counts(module)}
    assert counts == {"f": 6, "g": 1, "m": 2, "k": 0}
