"""An unknown key is refused at every level, with its name and the nearest valid one: in a config file, through
``--set``, in a sweep's search space, in a suite, and when the LAPT settings are built for the Ray workers. One
definition of each LAPT field (``components.training.LaptSettings``) serves the config and the loop."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from vocadapt.platform.config import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "configs" / "italian-smollm2.yaml"

# (dotted misspelt key, the field it should suggest), one per section of the experiment config
MISSPELT = [
    ("nme", "name"),
    ("source.modl", "model"),
    ("target.languag", "language"),
    ("corpus.min_line", "min_lines"),
    ("tokenizer.vocab_sise", "vocab_size"),
    ("init.method", "methods"),
    ("evaluation.max_lenght", "max_length"),
    ("lapt.lerning_rate", "learning_rate"),
    ("lapt.deepspeed.zero_stag", "zero_stage"),
    ("lapt.datasets.target.strming", "streaming"),
    ("tracking.experimnt", "experiment"),
]


def _expected(dotted: str, suggestion: str) -> str:
    return f"{dotted}: unknown field; did you mean {suggestion}?"


def _with_key(tree: dict, dotted: str, value) -> dict:
    *sections, last = dotted.split(".")
    node = tree
    for key in sections:
        node = node.setdefault(key, {})
    if sections[-1:] == ["target"] and sections[:2] == ["lapt", "datasets"]:
        node["dataset"] = "uonlp/CulturaX"  # a valid stream around the misspelt key
    node[last] = value
    return tree


@pytest.mark.parametrize(("dotted", "suggestion"), MISSPELT, ids=[d for d, _ in MISSPELT])
def test_an_unknown_key_in_a_config_file_is_named_with_the_nearest_field(tmp_path, dotted, suggestion):
    tree = _with_key(yaml.safe_load(DEMO.read_text(encoding="utf-8")), dotted, 1)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(tree), encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert _expected(dotted, suggestion) in str(error.value)


@pytest.mark.parametrize(("dotted", "suggestion"), MISSPELT, ids=[d for d, _ in MISSPELT])
def test_an_unknown_key_through_set_is_named_with_the_nearest_field(dotted, suggestion):
    with pytest.raises(ConfigError) as error:
        load_config(DEMO, [f"{dotted}=1"])
    assert _expected(dotted, suggestion) in str(error.value)


def test_set_through_the_command_line_names_the_unknown_lapt_key():
    from typer.testing import CliRunner

    from vocadapt.cli.app import app

    result = CliRunner().invoke(app, ["config", str(DEMO), "--set", "lapt.lerning_rate=0.1"])
    assert result.exit_code == 2
    assert _expected("lapt.lerning_rate", "learning_rate") in " ".join(result.output.split())


def test_lapt_settings_have_one_definition_shared_by_the_config_and_the_loop():
    """Every field the loop reads is the config's field, described once; the section adds only edge fields."""
    from vocadapt.components.training import LaptSettings
    from vocadapt.platform.config.lapt_sections import LaptSection

    assert issubclass(LaptSection, LaptSettings)
    loop_fields = LaptSettings.model_fields
    declared_at_the_edge = set(LaptSection.__dict__.get("__annotations__", {}))
    for name, field in loop_fields.items():
        assert name not in declared_at_the_edge, name  # not redefined at the edge
        assert repr(LaptSection.model_fields[name]) == repr(field) and field.description, name
    edge_only = set(LaptSection.model_fields) - set(loop_fields)
    assert edge_only == {"enabled", "train_files", "datasets", "num_workers", "use_gpu", "cpus_per_worker",
                         "storage_path", "max_failures", "teacher", "deepspeed", "runner"}


def test_defaults_follow_the_experiment_unless_the_lapt_section_sets_them():
    config = load_config(DEMO, ["seed=7"])
    assert (config.lapt.seed, config.lapt.eval_max_length, config.lapt.eval_batch_size) == (7, 128, 8)
    config = load_config(DEMO, ["seed=7", "lapt.seed=3", "lapt.eval_max_length=64"])
    assert (config.lapt.seed, config.lapt.eval_max_length) == (3, 64)


def test_the_worker_receives_the_validated_section_itself_and_refuses_unknown_keys(tmp_path):
    from vocadapt.platform.lapt.ray_train import LaptInputs, LaptPlacement, plan_lapt

    (tmp_path / "it.txt").write_text("ciao\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("hello\n", encoding="utf-8")
    files = dict(inputs=LaptInputs([tmp_path / "it.txt"], [tmp_path / "en.txt"]),
                 placement=LaptPlacement(tmp_path, "x"))
    config = load_config(DEMO)
    plan = plan_lapt(tmp_path, tmp_path, config.lapt, **files)
    assert plan.loop_config["settings"] is config.lapt  # no dict round trip between the config and the loop
    with pytest.raises(ConfigError) as error:
        plan_lapt(tmp_path, tmp_path, {"max_steps": 2, "objectve": "mtp"}, **files)
    assert _expected("lapt.objectve", "objective") in str(error.value)
    with pytest.raises(ConfigError, match=_expected("lapt.deepspeed.zero_stag", "zero_stage")):
        plan_lapt(tmp_path, tmp_path, {"deepspeed": {"zero_stag": 2}}, **files)


def _sweep(tmp_path, **changes) -> Path:
    tree = {"name": "s", "base": str(DEMO), "search_space": {"lapt.learning_rate": {"grid": [1e-3]}}}
    tree.update(changes)
    path = tmp_path / f"sweep-{len(list(tmp_path.glob('sweep-*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(tree), encoding="utf-8")
    return path


def test_an_unknown_key_in_a_sweep_is_named_with_the_nearest_field(tmp_path):
    from vocadapt.platform.sweeps.tune import load_sweep_config

    load_sweep_config(_sweep(tmp_path))  # the valid sweep the cases below break
    cases = [
        (_sweep(tmp_path, search_space={"lapt.lerning_rate": {"grid": [1e-3]}}), (),
         "search_space.lapt.lerning_rate: unknown field; did you mean learning_rate?"),
        (_sweep(tmp_path, search_space={"lapt.learning_rate": {"gird": [1e-3]}}), (),
         _expected("search_space.lapt.learning_rate.gird", "grid")),
        (_sweep(tmp_path, schedular={"kind": "fifo"}), (), _expected("schedular", "scheduler")),
        (_sweep(tmp_path, overrides=["lapt.max_stpes=2"]), (), _expected("lapt.max_stpes", "max_steps")),
        (_sweep(tmp_path), ("budget.num_sample=2",), _expected("budget.num_sample", "num_samples")),
    ]
    for path, overrides, expected in cases:
        with pytest.raises(ConfigError) as error:
            load_sweep_config(path, overrides)
        assert expected in str(error.value)


def test_an_unknown_key_in_a_suite_is_named_with_the_nearest_field(tmp_path):
    from vocadapt.components.errors import UserError
    from vocadapt.platform.evaluation.suites import SUITES_DIR, load_suite

    assert load_suite("offline", {"cloze.items": "3"}).cloze.items == 3
    with pytest.raises(UserError, match=_expected("cloze.itemz", "items")):
        load_suite("offline", {"cloze.itemz": "3"})
    tree = yaml.safe_load((SUITES_DIR / "offline.yaml").read_text(encoding="utf-8"))
    tree["cloze"]["itemz"] = 2
    tree["generation"]["repeat"] = 2
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(tree), encoding="utf-8")
    with pytest.raises(UserError) as error:
        load_suite(path)
    assert _expected("cloze.itemz", "items") in str(error.value)  # every section's problems, at once
    assert _expected("generation.repeat", "repeats") in str(error.value)
    tree = {"name": "x", "kind": "offline", "versoin": 2}
    path.write_text(yaml.safe_dump(tree), encoding="utf-8")
    with pytest.raises(UserError, match=_expected("versoin", "version")):
        load_suite(path)
