"""Every entry point that expands a vocabulary protects the embedded English word list unless told not to: `adapt`
(tokenizer.protect_lexicon), `languages` (MatrixSettings.protect_lexicon) and sweeps (their trials are adapt configs
built on the base). `tokenizer expand` has its own test (test_expand_defaults.py)."""

from __future__ import annotations

from pathlib import Path

from vocadapt.platform.config import ExperimentConfig
from vocadapt.platform.assets.sources import _source_lexicon

ROOT = Path(__file__).resolve().parents[2]
EXPAND = {"name": "x", "target": {"language": "it"}, "init": {"mode": "expand", "methods": ["fvt"]}}


def test_adapt_protects_the_embedded_word_list_by_default(embedded_assets):
    config = ExperimentConfig.model_validate(EXPAND)
    assert config.tokenizer.protect_lexicon == "embedded"
    assert _source_lexicon(config, embedded_assets) == embedded_assets.lexicon("en")
    assert embedded_assets.lexicon("en").is_file()
    opted_out = ExperimentConfig.model_validate({**EXPAND, "tokenizer": {"protect_lexicon": None}})
    assert _source_lexicon(opted_out, embedded_assets) is None  # opting out is explicit: null
    replace = ExperimentConfig.model_validate({**EXPAND, "init": {"mode": "replace", "methods": ["fvt"]}})
    assert _source_lexicon(replace, embedded_assets) is None  # nothing to protect when nothing is kept


def test_every_shipped_expand_config_protects_the_word_list():
    from vocadapt.platform.config import load_config

    for path in sorted((ROOT / "configs").glob("*.yaml")):
        config = load_config(path)
        if config.init.mode == "expand":
            assert config.tokenizer.protect_lexicon == "embedded", path.name


def test_sweep_trials_inherit_the_protection(tmp_path):
    from vocadapt.platform.sweeps.tune import load_sweep_config, trial_experiment, validate_sweep

    (tmp_path / "base.yaml").write_text("name: base\ntarget: {language: it}\ninit: {mode: expand}\n"
                                        "lapt: {max_steps: 2}\n")
    (tmp_path / "sweep.yaml").write_text("base: base.yaml\nsearch_space: {init.methods: {grid: [fvt, align]}}\n")
    sweep = load_sweep_config(tmp_path / "sweep.yaml")
    trials = [trial_experiment(sweep.base_tree(), combination) for combination in validate_sweep(sweep)]
    assert len(trials) == 2 and all(t.tokenizer.protect_lexicon == "embedded" for t in trials)


def test_the_language_matrix_protects_the_embedded_word_list_by_default(embedded_assets):
    from vocadapt.pipelines.languages import MatrixSettings, english_lexicon

    assert MatrixSettings().protect_lexicon == "embedded"
    lexicon = english_lexicon(MatrixSettings().protect_lexicon)
    assert lexicon.name == embedded_assets.lexicon("en").name and len(lexicon.words) > 100_000
    assert english_lexicon(None).words == ()

