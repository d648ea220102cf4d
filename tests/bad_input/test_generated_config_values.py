"""Generated bad values for every field of the experiment config, found by walking the schema, and generated bad
config files (keys given twice, bytes that are not UTF-8, empty files, names that leave output_dir, unknown
languages): each is refused by ``load_config`` with a ConfigError (a UserError) naming the field or the file, before
any file is read or written. A new field is covered by the walk: a numeric field without a lower bound fails
``test_every_numeric_field_is_bounded``, and its bounds are then tried from both sides."""

from __future__ import annotations

import math
import typing
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from vocadapt.components.errors import UserError
from vocadapt.components.language_id import LID_LABELS
from vocadapt.platform.config import ExperimentConfig, load_config
from vocadapt.platform.config.loading import _Entries, _schema_of

SETTINGS = settings(max_examples=25, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
BASE = {"target": {"language": "it"}}
# Numeric fields whose whole range is meaningful (none today): listed with the reason, or the walk refuses them.
UNBOUNDED: dict[str, str] = {}


def leaf_fields(model: type[BaseModel] = ExperimentConfig, prefix: str = ""):
    """(dotted name, pydantic field) of every value the config holds; named entries (lapt.datasets.<stream>) are
    walked under the stream 'target'."""
    for name, field in model.model_fields.items():
        inner = _schema_of(field.annotation)
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            yield from leaf_fields(inner, f"{prefix}{name}.")
        elif isinstance(inner, _Entries) and inner.value is not None:
            yield from leaf_fields(inner.value, f"{prefix}{name}.target.")
        else:
            yield f"{prefix}{name}", field


def _numeric(annotation) -> type | None:
    kinds = {argument for argument in (typing.get_args(annotation) or (annotation,)) if argument is not type(None)}
    return kinds.pop() if len(kinds) == 1 and kinds <= {int, float} else None


def _bounds(field) -> tuple[float | None, bool, float | None, bool]:
    """(lower, lower inclusive, upper, upper inclusive) from the field's metadata."""
    lower = upper = None
    lower_inclusive = upper_inclusive = True
    for item in field.metadata:
        for attribute, inclusive, is_lower in (("ge", True, True), ("gt", False, True), ("le", True, False),
                                               ("lt", False, False)):
            value = getattr(item, attribute, None)
            if value is not None:
                if is_lower:
                    lower, lower_inclusive = value, inclusive
                else:
                    upper, upper_inclusive = value, inclusive
    return lower, lower_inclusive, upper, upper_inclusive


FIELDS = list(leaf_fields())
NUMERIC = [(name, field) for name, field in FIELDS if _numeric(field.annotation) and name not in UNBOUNDED]
LITERAL = [(name, field) for name, field in FIELDS if typing.get_origin(field.annotation) is typing.Literal]


def _tree(dotted: str, value) -> dict:
    import copy

    from vocadapt.platform.config import set_dotted

    tree = copy.deepcopy(BASE)
    set_dotted(tree, dotted, value)
    return tree


def _refused(tree: dict, named: str, tmp_path: Path) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(tree, allow_unicode=True), encoding="utf-8")
    with pytest.raises(UserError) as refused:
        load_config(path)
    assert named in str(refused.value), (named, str(refused.value))
    return str(refused.value)


def test_the_base_config_is_accepted():
    assert load_config(None, ["target.language=it"]).target.language == "it"


def test_every_numeric_field_is_bounded():
    """Counts >= 1 (or >= 0 where 0 means 'none'), fractions in [0, 1], rates > 0: every numeric field says its
    least value in the schema."""
    unbounded = [name for name, field in NUMERIC if _bounds(field)[0] is None]
    assert not unbounded, f"numeric fields without a lower bound: {unbounded}"
    assert len(NUMERIC) >= 40  # the walk reaches the nested sections


@pytest.mark.parametrize("name,field", NUMERIC, ids=[name for name, _ in NUMERIC])
@settings(max_examples=4, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_numeric_field_out_of_its_bounds_or_of_its_type_is_refused(name, field, data, tmp_path_factory):
    kind = _numeric(field.annotation)
    lower, lower_inclusive, upper, upper_inclusive = _bounds(field)
    wrong = [st.text(alphabet="abcxyz", min_size=1, max_size=6), st.lists(st.integers(), min_size=1, max_size=2)]
    if kind is int:
        wrong.append(st.floats(allow_nan=False, allow_infinity=False).filter(lambda v: not float(v).is_integer()))
        wrong.append(st.integers(-10**9, math.ceil(lower) - (1 if lower_inclusive else 0)))
        if upper is not None:
            wrong.append(st.integers(math.floor(upper) + (1 if upper_inclusive else 0), 10**12))
    else:
        wrong.append(st.sampled_from([math.nan, math.inf, -math.inf]))
        wrong.append(st.floats(max_value=lower, exclude_max=lower_inclusive, allow_nan=False, min_value=-1e12))
        if upper is not None:
            wrong.append(st.floats(min_value=upper, exclude_min=upper_inclusive, allow_nan=False, max_value=1e12))
    value = data.draw(st.one_of(wrong))
    assume(not isinstance(value, str) or yaml.safe_load(value) == value)  # 'yes' would be read as a bool
    _refused(_tree(name, value), name, tmp_path_factory.mktemp("config"))


@pytest.mark.parametrize("name,field", LITERAL, ids=[name for name, _ in LITERAL])
@settings(max_examples=3, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.text(alphabet="abcdefxyz-_", min_size=1, max_size=12))
def test_a_choice_outside_its_list_is_refused(name, field, value, tmp_path_factory):
    assume(value not in typing.get_args(field.annotation) and yaml.safe_load(value) == value)
    _refused(_tree(name, value), name, tmp_path_factory.mktemp("config"))


@SETTINGS
@given(name=st.one_of(
    st.builds(lambda a, b: f"{a}/{b}", st.text(min_size=0, max_size=4), st.text(min_size=1, max_size=4)),
    st.sampled_from(["..", ".", "../../x", "a/../../b", "/etc", "", "  ", "a\\b"])))
def test_a_name_that_is_not_one_folder_is_refused(name, tmp_path_factory):
    _refused(_tree("name", name), "name", tmp_path_factory.mktemp("config"))


@SETTINGS
@given(name=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,20}", fullmatch=True))
def test_a_one_component_name_is_accepted(name, tmp_path_factory):
    assume(name not in (".", ".."))
    path = tmp_path_factory.mktemp("config") / "config.yaml"
    path.write_text(yaml.safe_dump(_tree("name", name)), encoding="utf-8")  # quoted where YAML would read a number
    assert load_config(path).name == name


@SETTINGS
@given(language=st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=4),
       field=st.sampled_from(["target.language", "target.source_language"]))
def test_a_language_lid_cannot_check_is_refused(language, field, tmp_path_factory):
    assume(language not in LID_LABELS and yaml.safe_load(language) == language)
    _refused(_tree(field, language), field, tmp_path_factory.mktemp("config"))


def test_the_language_list_is_lid176s():
    from vocadapt.components.language_id import known_labels

    assert LID_LABELS == known_labels()


@SETTINGS
@given(data=st.data())
def test_a_key_given_twice_is_refused_naming_it(data, tmp_path_factory):
    """A valid config written as YAML lines, one of its keys repeated (at the top or inside a section)."""
    sections = {"target": {"language": "it", "source_language": "en"}, "seed": 3, "name": "run",
                "lapt": {"max_steps": 5, "learning_rate": 0.001}, "corpus": {"min_lines": 10}}
    top = data.draw(st.sampled_from(sorted(sections)))
    lines = []
    for key, value in sections.items():
        if isinstance(value, dict):
            lines.append(f"{key}:")
            inner = list(value.items())
            for sub, sub_value in inner:
                lines.append(f"  {sub}: {sub_value}")
            if key == top:
                sub, sub_value = data.draw(st.sampled_from(inner))
                lines.append(f"  {sub}: {sub_value}")
                repeated = sub
        else:
            lines.append(f"{key}: {value}")
            if key == top:
                lines.append(f"{key}: {value}")
                repeated = key
    path = tmp_path_factory.mktemp("config") / "config.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(UserError) as refused:
        load_config(path)
    assert str(path) in str(refused.value) and f"key {repeated!r}" in str(refused.value) and "twice" in str(
        refused.value)


@SETTINGS
@given(data=st.data())
def test_a_byte_that_is_not_utf8_is_refused_naming_the_file_and_line(data, tmp_path_factory):
    text = "name: run\ntarget:\n  language: it\nlapt:\n  max_steps: 5\n".encode()
    where = data.draw(st.integers(0, len(text)))
    byte = bytes([data.draw(st.integers(0x80, 0xBF))])  # a continuation byte after ASCII is never UTF-8
    path = tmp_path_factory.mktemp("config") / "config.yaml"
    path.write_bytes(text[:where] + byte + text[where:])
    with pytest.raises(UserError) as refused:
        load_config(path)
    line = text[:where].count(b"\n") + 1
    assert str(path) in str(refused.value) and f"line {line}" in str(refused.value) and "UTF-8" in str(refused.value)


@pytest.mark.parametrize("text", ["", "\n", "# only a comment\n", "{}\n", "---\n"])
def test_an_empty_config_file_is_refused(text, tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match="is empty"):
        load_config(path)


@pytest.mark.parametrize("text", ["", "{}\n", "promotion:\n", "# defaults\n"])
def test_an_empty_gates_file_is_refused_before_the_store_is_touched(text, tmp_path, monkeypatch):
    """An empty gates file would read as 'the defaults' and move the alias: refused, no store created."""
    from typer.testing import CliRunner

    from vocadapt.cli.app import app

    gates = tmp_path / "gates.yaml"
    gates.write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["promote", "some-model", "--version", "1", "--gates", str(gates),
                                      "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db"], catch_exceptions=False)
    assert result.exit_code == 2 and str(gates) in " ".join(result.output.split()), result.output
    assert sorted(path.name for path in tmp_path.iterdir()) == ["gates.yaml"]
