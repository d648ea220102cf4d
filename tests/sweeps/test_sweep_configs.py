"""Every shipped sweep config validates (the config test of the lead skips configs/sweeps/), and bad sweep configs
fail before any trial starts, naming the field, the value and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from vocadapt.platform.config import ConfigError
from vocadapt.platform.sweeps.tune import load_sweep_config, trial_experiment, validate_sweep

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "configs" / "sweeps").rglob("*.yaml"))


def test_sweep_configs_are_shipped():
    assert any(p.name == "italian-smollm2.yaml" for p in SHIPPED)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_sweep_config_validates_every_trial(path):
    from vocadapt.pipelines.sweep import check_methods
    from vocadapt.cli.commands.promote import load_gates

    sweep = load_sweep_config(path)
    check_methods(sweep)  # every initialiser named is registered
    base = sweep.base_tree()
    for combination in validate_sweep(sweep):
        config = trial_experiment(base, combination)
        assert len(config.init.methods) == 1
    assert load_gates(path) == sweep.promotion


def test_the_demo_sweep_is_four_methods_by_two_vocabulary_sizes_at_a_tiny_budget():
    sweep = load_sweep_config(ROOT / "configs" / "sweeps" / "italian-smollm2.yaml")
    trials = [trial_experiment(sweep.base_tree(), c) for c in validate_sweep(sweep)]
    assert sorted({t.init.methods[0] for t in trials}) == ["focus", "fvt", "random", "sava"]
    assert len({t.tokenizer.vocab_size for t in trials}) == 2 and len(trials) == 8
    assert all(t.lapt.max_steps <= 5 and t.source.model == "embedded:smollm2-135m" for t in trials)
    assert sweep.scheduler.kind == "asha"


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "base.yaml").write_text("name: base\ntarget: {language: it}\nlapt: {max_steps: 2}\n")
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text, message",
    [
        ("base: base.yaml\nsearch_space: {tokenizer.vocab_sise: {grid: [512]}}\n", "search_space.tokenizer.vocab_sise"),
        ("base: base.yaml\nsearch_space: {tokenizer.vocab_size: {grid: [512, 10]}}\n", "value 10"),
        ("base: base.yaml\nsearch_space: {lapt.learning_rate: {grid: [0.1], uniform: [0, 1]}}\n", "exactly one"),
        ("base: missing.yaml\nsearch_space: {init.methods: {grid: [fvt]}}\n", "missing.yaml"),
        ("base: base.yaml\nsearch_space: {}\n", "search_space"),
        ("base: base.yaml\noverrides: [lapt.max_steps=-1]\nsearch_space: {init.methods: {grid: [fvt]}}\n",
         "base experiment is invalid"),
        ("base: base.yaml\nsearch_space: {init.methods: {grid: [fvt]}}\nbudget: {max_concurrent_trials: 0}\n",
         "budget.max_concurrent_trials"),
    ],
    ids=["unknown field", "bad value", "two kinds", "missing base", "empty space", "bad base", "bad budget"],
)
def test_bad_sweep_configs_fail_naming_the_problem(tmp_path, text, message):
    with pytest.raises(ConfigError) as error:
        load_sweep_config(_write(tmp_path, text))
    assert message in str(error.value)


def test_unknown_initialiser_fails_before_ray_starts(tmp_path):
    from vocadapt.pipelines.sweep import check_methods
    from vocadapt.components.errors import UserError

    sweep = load_sweep_config(_write(tmp_path, "base: base.yaml\nsearch_space: {init.methods: {grid: [fvt, telepathy]}}\n"))
    with pytest.raises(UserError, match="telepathy"):
        check_methods(sweep)


def test_sweep_command_reports_a_bad_config_with_exit_2(tmp_path):
    from vocadapt.cli.app import app

    result = CliRunner().invoke(app, ["sweep", "--config", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2 and "does not exist" in result.output
    result = CliRunner().invoke(app, ["sweep"])
    assert result.exit_code == 2 and "--config" in result.output


@settings(max_examples=15, deadline=None)
@given(size=st.integers(256, 100_000), method=st.sampled_from(["random", "fvt", "focus"]),
       rate=st.floats(1e-6, 1.0))
def test_a_trial_sets_exactly_its_fields_and_leaves_the_base_alone(size, method, rate):
    base = {"name": "b", "target": {"language": "it"}, "lapt": {"max_steps": 3}, "init": {"methods": ["random", "fvt"]}}
    config = trial_experiment(base, {"tokenizer.vocab_size": size, "init.methods": method,
                                     "lapt.learning_rate": rate})
    assert (config.tokenizer.vocab_size, config.init.methods, config.lapt.learning_rate) == (size, [method], rate)
    assert config.lapt.max_steps == 3 and base["init"]["methods"] == ["random", "fvt"] and "tokenizer" not in base


def test_param_space_maps_each_kind_to_a_tune_sampler(tmp_path):
    from ray.tune.search.sample import Float, Integer

    from vocadapt.platform.sweeps.tune import param_space

    sweep = load_sweep_config(_write(tmp_path, (
        "base: base.yaml\nsearch_space:\n  init.methods: {grid: [fvt, random]}\n"
        "  lapt.learning_rate: {loguniform: [1.0e-5, 1.0e-3]}\n  tokenizer.vocab_size: {randint: [512, 1024]}\n")))
    space = param_space(sweep)
    assert space["init.methods"] == {"grid_search": ["fvt", "random"]}
    assert isinstance(space["lapt.learning_rate"], Float) and isinstance(space["tokenizer.vocab_size"], Integer)


def test_every_dimension_the_papers_vary_is_sweepable(tmp_path):
    sweep = load_sweep_config(_write(tmp_path, (
        "base: base.yaml\nsearch_space:\n  init.methods: {grid: [random, fvt]}\n"
        "  tokenizer.vocab_size: {grid: [8192, 16384]}\n  init.mode: {grid: [replace, expand]}\n"
        "  lapt.strategy: {choice: [full, lora]}\n  lapt.learning_rate: {loguniform: [1.0e-5, 1.0e-3]}\n"
        "  tokenizer.expand_top_k: {grid: [50, 5000]}\n"  # k new tokens ('0.01GB' §7.4)
        "  lapt.objective: {grid: [clm, clm+distill]}\n")))  # recovery by distillation from the source model
    grid = validate_sweep(sweep)
    assert len(grid) == 32
    trials = [trial_experiment(sweep.base_tree(), assignment) for assignment in grid]
    assert {trial.lapt.objective for trial in trials} == {"clm", "clm+distill"}
    assert {trial.lapt.distills for trial in trials} == {False, True}
    with pytest.raises(ConfigError, match="lapt.strategy.*'sideways'"):
        load_sweep_config(_write(tmp_path, "base: base.yaml\nsearch_space: {lapt.strategy: {choice: [sideways]}}\n"))


@pytest.mark.parametrize("trial, workers, concurrent, problem", [
    ({"CPU": 1, "GPU": 0}, {"CPU": 1, "GPU": 0}, 1, None),  # the demo sweep on 2 cores: one trial, its one worker
    ({"CPU": 1, "GPU": 0}, {"CPU": 0, "GPU": 0}, 2, None),  # LAPT in the trial's process: nothing more to wait for
    ({"CPU": 1, "GPU": 0}, {"CPU": 1, "GPU": 0}, 2, "CPU: 2 trials at once hold 2 of 2, leaving 0 for a LAPT worker "
                                                   "group that asks for 1"),
    ({"CPU": 1, "GPU": 0}, {"CPU": 2, "GPU": 0}, 1, "CPU: one trial holds 1 and its LAPT workers ask for 2 more, 2 in "
                                                   "the cluster"),
    ({"CPU": 1, "GPU": 1}, {"CPU": 1, "GPU": 0}, 4, None),  # one GPU keeps Tune to one trial: a CPU stays free
])
def test_trials_whose_lapt_workers_cannot_start_beside_them_are_named(trial, workers, concurrent, problem):
    from vocadapt.platform.lapt.resources import sweep_deadlock

    available = {"CPU": 2.0, "GPU": 0.0 if trial["GPU"] == 0 else 1.0}
    problems = sweep_deadlock(trial, workers, concurrent, available)
    assert problems == ([] if problem is None else [problem])


def _lapt_sweep(tmp_path: Path, concurrent: int, **lapt: object) -> Path:
    import yaml

    base = {"name": "base", "target": {"language": "it"},
            "lapt": {"max_steps": 2, "runner": "ray", "num_workers": 1, "cpus_per_worker": 1, **lapt}}
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base))
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({
        "name": "deadlock", "base": "base.yaml", "search_space": {"init.methods": {"grid": ["fvt"]}},
        "budget": {"max_concurrent_trials": concurrent, "cpus_per_trial": 1},
        "storage_path": str(tmp_path / "sweeps")}))
    return path


def test_a_sweep_whose_trials_would_wait_for_each_others_cpus_is_refused_before_ray_starts(tmp_path, monkeypatch):
    """On a 2-CPU machine (os.cpu_count pinned, so the case reads the same on any test machine): two trials at
    once, each holding a CPU, leave none for either trial's LAPT worker; the command exits 2 naming the
    concurrency that fits, before Ray starts and before any folder or run exists."""
    import ray

    from vocadapt.cli.app import app
    from vocadapt.components.errors import UserError
    from vocadapt.pipelines.sweep import check_sweep_resources

    monkeypatch.setattr("os.cpu_count", lambda: 2)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    result = CliRunner().invoke(app, ["sweep", "--config", str(_lapt_sweep(tmp_path, 2))])
    assert result.exit_code == 2, result.output
    assert "could wait for ever" in result.output and "budget.max_concurrent_trials: 1" in result.output
    assert "lapt.runner: in_process" in result.output
    assert not ray.is_initialized() and not (tmp_path / "sweeps").exists() and not (tmp_path / "mlflow.db").exists()
    check_sweep_resources(load_sweep_config(_lapt_sweep(tmp_path, 1)))  # one at a time fits
    for shipped in ("italian-smollm2.yaml", "recovery-cpu.yaml"):  # the CPU sweeps fit a 2-core laptop
        check_sweep_resources(load_sweep_config(ROOT / "configs" / "sweeps" / shipped))
    check_sweep_resources(load_sweep_config(_lapt_sweep(tmp_path, 2, runner="in_process")))
    with pytest.raises(UserError, match="one trial holds 1 and its LAPT workers ask for 2 more"):
        check_sweep_resources(load_sweep_config(_lapt_sweep(tmp_path, 1, num_workers=2)))
