"""Reading a config: the YAML file (UTF-8, a mapping, each key once), dotted command-line overrides
(``--set lapt.max_steps=5``) checked name by name against the schema, and validation whose message names the field
and the fix. ``set_dotted`` is also the dotted setter of sweeps and suites. Imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from vocadapt.components.typed_settings import unknown_field_message, validation_problems

from vocadapt.platform.config.experiment import ExperimentConfig
from vocadapt.platform.config.lapt_sections import ConfigError


def apply_override(tree: dict[str, Any], assignment: str, schema: type[BaseModel] = ExperimentConfig) -> None:
    """Apply one ``a.b.c=value`` override in place; the value is parsed as YAML (numbers, lists, booleans)."""
    if "=" not in assignment:
        raise ConfigError(f"override {assignment!r} has no '='; write it as section.field=value")
    dotted, raw = assignment.split("=", 1)
    try:
        value = yaml.load(raw, Loader=UniqueKeyLoader) if raw.strip() else None
    except yaml.YAMLError as error:
        raise ConfigError(f"override {assignment!r}: the value is not valid YAML ({error})") from error
    set_dotted(tree, dotted.strip(), value, schema)


def set_dotted(tree: dict[str, Any], dotted: str, value: Any, schema: type[BaseModel] | None = ExperimentConfig,
               *, where: str = "") -> None:
    """Set ``a.b.c`` in the mapping ``tree`` that will be validated as ``schema``: the one dotted setter of configs,
    sweeps and suites. A name ``schema`` does not have is refused with the nearest valid one; ``where`` prefixes
    the dotted name in messages (``search_space.``)."""
    keys = dotted.split(".")
    node, expected = tree, schema
    for depth, key in enumerate(keys):
        if isinstance(expected, _Entries):  # a mapping of named entries (lapt.datasets.<stream>): any key
            expected = expected.value
        elif expected is not None:
            if key not in expected.model_fields:
                path = ".".join(keys[:depth])
                raise ConfigError(f"{where}{path + '.' if path else ''}"
                                  f"{unknown_field_message(key, expected.model_fields)}")
            expected = _schema_of(expected.model_fields[key].annotation)
        if depth == len(keys) - 1:
            node[key] = value
            return
        node = node.setdefault(key, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{where}{'.'.join(keys[: depth + 1])}: {key!r} is not a section")


@dataclass(frozen=True)
class _Entries:
    """A ``dict[str, <model>]`` field: its keys are names the config chooses, its values ``value`` models."""

    value: type[BaseModel] | None


def _schema_of(annotation: Any) -> type[BaseModel] | _Entries | None:
    """The model a field holds (``X``, ``X | None``), ``_Entries`` for ``dict[str, X]``, or None (a plain value)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin, arguments = get_origin(annotation), get_args(annotation)
    if origin is dict and len(arguments) == 2:
        inner = _schema_of(arguments[1])
        return _Entries(None if isinstance(inner, _Entries) else inner)
    models = [found for found in map(_schema_of, arguments) if found is not None] if origin is not dict else []
    return models[0] if len(models) == 1 else None


def load_config(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> ExperimentConfig:
    """Read a YAML config, apply dotted overrides, validate. Raises ConfigError naming the field and the fix."""
    tree: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        tree = read_yaml_mapping(path, "config file", "configs/italian-smollm2.yaml")
    for assignment in overrides:
        apply_override(tree, assignment)
    try:
        return ExperimentConfig.model_validate(tree)
    except ValidationError as error:
        raise ConfigError(_explain(error, path)) from error


class UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (plain YAML keeps the last one silently)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"key {key!r} on line {line} is given twice (first on line {seen[key]}); "
                            "give each key once", key_node.start_mark)
                    seen[key] = line
                except TypeError:  # an unhashable key: the base loader names it
                    pass
        return super().construct_mapping(node, deep=deep)


def read_yaml_mapping(path: Path, what: str, example: str) -> dict[str, Any]:
    """A YAML file holding a non-empty mapping with each key once, UTF-8, or ConfigError saying what is wrong with
    it (``what``: "config file")."""
    from vocadapt.components.input_files import read_text

    if not path.is_file():
        raise ConfigError(f"{what} {path} does not exist; pass a YAML file such as {example}")
    text = read_text(path, what)  # a byte that is not UTF-8 is named with its line
    try:
        tree = yaml.load(text, Loader=UniqueKeyLoader)
    except yaml.YAMLError as error:
        raise ConfigError(f"{what} {path} is not valid YAML: {error}") from error
    if tree is None or tree == {}:
        raise ConfigError(f"{what} {path} is empty; it would silently mean every default. Write the settings in "
                          f"it (see {example})")
    if not isinstance(tree, dict):
        raise ConfigError(f"{what} {path} must hold a mapping, not {type(tree).__name__}")
    return tree


def _explain(error: ValidationError, path: Path | None) -> str:
    where = f" in {path}" if path else ""
    return "\n".join([f"invalid config{where}:", *(f"  {line}" for line in validation_problems(error))])
