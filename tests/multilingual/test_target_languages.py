"""target.languages: several target languages in one config, target.language its one-language form."""

from __future__ import annotations

import pytest

from vocadapt.platform.config import ConfigError, ExperimentConfig, load_config


def _config(**target) -> ExperimentConfig:
    return load_config(None, [f"target.{key}={value}" for key, value in target.items()])


def test_a_list_of_languages_is_kept_in_order_and_the_first_is_primary():
    config = _config(languages="[it, de, ru]")
    assert config.target.languages == ["it", "de", "ru"]
    assert config.target.language == "it" and config.target.multilingual


def test_one_language_means_a_list_of_one():
    config = _config(language="it")
    assert config.target.languages == ["it"] and not config.target.multilingual


@pytest.mark.parametrize("target", [{"language": "it"}, {"languages": ["it", "de", "ru"]}])
def test_a_dumped_config_validates_again_in_the_form_it_came_in(target):
    config = ExperimentConfig.model_validate({"target": target})
    dumped = config.model_dump(mode="json")
    assert dumped["target"] == target | {"source_language": "en"}
    assert ExperimentConfig.model_validate(dumped).target.languages == config.target.languages


@pytest.mark.parametrize(("target", "problem"), [
    ({"languages": "[it, de, it]"}, "it listed twice in target.languages"),
    ({"languages": "[it, xx]"}, "'xx' is not a language code"),
    ({"language": "it", "languages": "[de, ru]"}, r"give one: target.languages: \['it', 'de', 'ru'\]"),
    ({"languages": "[]"}, "target.languages"),
    ({"languages": "[en, it]"}, "source_language 'en' is also a target language"),
    ({"source_language": "en"}, "no target language: give target.language"),
])
def test_a_bad_language_list_is_refused_with_the_fix(target, problem):
    with pytest.raises(ConfigError, match=problem):
        _config(**target)


def test_lapt_mixing_splits_the_target_share_over_the_languages_unless_each_is_given():
    assert _config(languages="[it, de, ru]").lapt.mixing == {"target": 0.25, "target_de": 0.25, "target_ru": 0.25,
                                                             "source": 0.25}
    assert _config(languages="[it, de]").lapt.mixing == {"target": 0.375, "target_de": 0.375, "source": 0.25}
    shares = load_config(None, ["target.languages=[it, de]", "lapt.mixing={target: 0.5, target_de: 0.3, source: 0.2}"])
    assert shares.lapt.mixing == {"target": 0.5, "target_de": 0.3, "source": 0.2}
    assert _config(language="it").lapt.mixing == {"target": 0.75, "source": 0.25}


@pytest.mark.parametrize(("overrides", "problem"), [
    (["target.languages=[it, de, ru]", "lapt.mixing={target: 0.5, target_de: 0.25, source: 0.25}"],
     "but not to target_ru"),
    (["target.language=it", "lapt.mixing={target: 0.5, target_de: 0.25, source: 0.25}"],
     "target_de, which is not a further language"),
    (["target.languages=[it, de]", "corpus.train=[a.txt]", "corpus.validation=[b.txt]"],
     "corpus.languages lists no language"),
    (["target.language=it", "corpus.train=[a.txt]", "corpus.validation=[b.txt]",
      "corpus.languages={de: {train: [c.txt], validation: [d.txt]}}"], "drop corpus.languages"),
    (["target.languages=[it, de]", "tokenizer.pretrained=some/tokenizer"], "leave tokenizer.pretrained unset"),
])
def test_what_several_languages_cannot_take_is_refused_with_the_fix(overrides, problem):
    with pytest.raises(ConfigError, match=problem):
        load_config(None, overrides)


def test_the_registered_name_names_every_language():
    from vocadapt.platform.model_loading import registered_model_name

    assert registered_model_name(_config(languages="[it, de, ru]")) == "vocadapt-it-de-ru-smollm2-135m"
    assert registered_model_name(_config(language="it")) == "vocadapt-it-smollm2-135m"
