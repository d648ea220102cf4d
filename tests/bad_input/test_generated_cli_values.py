"""Every numeric option of every command, found by walking the typer app, is refused below its least value before
any work: exit 2, the flag named, nothing written. A new command or option is covered without a new case: its
least value is the option's ``min=`` (typer), else ``LEAST`` below (a check in the command's body), else 0 (no
count, port, seed or version is negative)."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from vocadapt.cli.app import app

# options checked in the command's body (cli/values.py::at_least, or the command's own check), with their least
LEAST = {("init", "--rows"): 1, ("params", "--vocab-size"): 1, ("tokenizer train", "--vocab-size"): 1,
         ("tokenizer train", "--min-frequency"): 1, ("tokenizer train", "--max-lines"): 1,
         ("tokenizer expand", "--top-k"): 1}
# values that let a command reach its value checks (these run before any file is read)
VALID = {"--method": "fvt", "--kind": "bytelevel-bpe", "--mode": "replace", "--lang": "it"}


def numeric_options() -> list[tuple[str, typer.core.TyperOption, list]]:
    """(command path, option, the other required options) for every int or float option of the app."""
    found = []

    def walk(command, path):
        if hasattr(command, "commands"):
            for name, sub in sorted(command.commands.items()):
                walk(sub, [*path, name])
            return
        required = [p for p in command.params if p.required]
        for param in command.params:
            if param.type_descriptor.annotation in (int, float) and param.opts[0].startswith("--"):
                found.append((" ".join(path), param, [p for p in required if p is not param]))

    walk(typer.main.get_command(app), [])
    return found


OPTIONS = numeric_options()


def _required_args(required, cwd: Path) -> list[str]:
    args = []
    for param in required:
        annotation = param.type_descriptor.annotation
        value = VALID.get(param.opts[0]) or ("1" if annotation in (int, float) else str(cwd / "missing"))
        args += [value] if not param.opts[0].startswith("-") else [param.opts[0], value]
    return args


def test_the_walk_finds_the_numeric_options():
    names = {(command, param.opts[0]) for command, param, _ in OPTIONS}
    assert {("init", "--rows"), ("tokenizer expand", "--top-k"), ("serve", "--port"), ("evaluate", "--limit")} <= names
    assert set(LEAST) <= names, set(LEAST) - names  # a renamed option must not leave its bound unchecked


@pytest.mark.parametrize("command,param,required", OPTIONS, ids=[f"{c} {p.opts[0]}" for c, p, _ in OPTIONS])
@settings(max_examples=10, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_value_below_the_least_is_refused_before_any_work(command, param, required, data, tmp_path_factory,
                                                           monkeypatch):
    least = param.min if param.min is not None else LEAST.get((command, param.opts[0]), 0)
    value = data.draw(st.integers(-10**9, least - 1) if param.type_descriptor.annotation is int
                      else st.floats(max_value=least, exclude_max=True, allow_nan=False, allow_infinity=False))
    cwd = tmp_path_factory.mktemp("cli-value")
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{cwd}/mlflow.db")
    args = [*command.split(), *_required_args(required, cwd), param.opts[0], str(value)]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    output = " ".join(result.output.split())
    assert result.exit_code == 2, (args, output)
    assert param.opts[0] in output and "Traceback" not in output, (args, output)
    assert not any(cwd.iterdir()), sorted(cwd.rglob("*"))
