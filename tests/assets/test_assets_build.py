"""How `build_assets` / `load_assets` behave: atomic, instant the second time, clear when missing. The expensive
builders are replaced by small fakes here; test_embedded_default.py checks the real thing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vocadapt.platform.assets import builders as asset_builders
from vocadapt.platform.assets.embedded import AssetsNotBuilt, build_assets, load_assets, vocadapt_home
from vocadapt.cli.app import app


class FakeBuilders:
    """Stands in for the model conversion and the corpus build; counts calls and can fail half-way."""

    def __init__(self, fail_in_corpora: bool = False) -> None:
        self.model_calls = 0
        self.corpus_calls: list[list[str]] = []
        self.fail_in_corpora = fail_in_corpora
        self.lexicon_calls: list[str] = []
        self.lexicon_missing = False

    def build_model(self, workspace: Path, console) -> dict:
        self.model_calls += 1
        folder = workspace / "models" / "smollm2-135m"
        folder.mkdir(parents=True)
        (folder / "model.safetensors").write_bytes(b"weights")
        return {"dir": "models/smollm2-135m", "name": "fake", "licence": "test"}

    def build_corpora(self, languages, downloads, workspace, console) -> asset_builders.BuiltCorpora:
        self.corpus_calls.append(list(languages))
        built = asset_builders.BuiltCorpora(sources={"fake": {"licence": "test"}})
        for lang in languages:
            folder = workspace / "corpora" / lang
            folder.mkdir(parents=True)
            for split in ("train", "validation", "test"):
                (folder / f"{split}.txt").write_text(f"{lang} {split} one\n{lang} {split} two\n", encoding="utf-8")
            if self.fail_in_corpora and lang != "en":
                raise RuntimeError("interrupted")
            built.corpora[lang] = {"folders": [f"corpora/{lang}"], "sources": ["fake"], "units": {}, "dropped": {}}
        return built

    def build_lexicon(self, lang, downloads, workspace, console) -> dict:
        self.lexicon_calls.append(lang)
        if self.lexicon_missing:
            return {"missing": "could not download wamerican-large (offline)"}
        (workspace / "lexicons").mkdir(parents=True, exist_ok=True)
        (workspace / "lexicons" / f"{lang}.txt").write_text("colour\ncolor\n", encoding="utf-8")
        return {"file": f"lexicons/{lang}.txt", "words": 2}

    def build_word_vectors(self, lang, corpus, workspace, console) -> dict:
        (workspace / "word_vectors").mkdir(parents=True, exist_ok=True)
        (workspace / "word_vectors" / f"{lang}.bin").write_bytes(corpus.read_bytes())
        from vocadapt.platform.assets.word_vectors import word_vector_settings

        return {"file": f"word_vectors/{lang}.bin", "settings": word_vector_settings()}

    def build_dictionary(self, lang, downloads, workspace, console) -> dict:
        return {"missing": "offline"}


@pytest.fixture()
def fake(monkeypatch) -> FakeBuilders:
    builders = FakeBuilders()
    monkeypatch.setattr(asset_builders, "build_model", builders.build_model)
    monkeypatch.setattr(asset_builders, "build_corpora", builders.build_corpora)
    monkeypatch.setattr(asset_builders, "build_lexicon", builders.build_lexicon)
    from vocadapt.platform.assets import word_vectors  # WECHSEL's word models and dictionaries

    monkeypatch.setattr(word_vectors, "build_word_vectors", builders.build_word_vectors)
    monkeypatch.setattr(word_vectors, "build_dictionary", builders.build_dictionary)
    return builders


def test_home_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("VOCADAPT_HOME", str(tmp_path / "h"))
    assert vocadapt_home() == tmp_path / "h"
    monkeypatch.delenv("VOCADAPT_HOME")
    assert vocadapt_home() == Path.home() / ".cache" / "vocadapt"


def test_build_then_instant_then_only_new_language(tmp_path, fake):
    assets = build_assets(tmp_path, ("it",))
    assert fake.model_calls == 1 and fake.corpus_calls == [["en", "it"]]
    assert assets.corpus("it", "train").read_text(encoding="utf-8").startswith("it train one")
    assert assets.model_dir == tmp_path / "models" / "smollm2-135m"
    manifest = json.loads((tmp_path / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["files"]["corpora/it/test.txt"]["lines"] == 2
    assert set(manifest["files"]) == {"models/smollm2-135m/model.safetensors", "lexicons/en.txt"} | {
        f"corpora/{lang}/{split}.txt" for lang in ("en", "it") for split in ("train", "validation", "test")
    } | {"word_vectors/en.bin", "word_vectors/it.bin"}
    assert manifest["dictionaries"] == {"en-it": {"missing": "offline"}}
    assert assets.verify() == []
    assert assets.lexicon("en") == tmp_path / "lexicons" / "en.txt" and assets.lexicon("it") is None

    build_assets(tmp_path, ("it",))
    assert fake.model_calls == 1 and len(fake.corpus_calls) == 1 and fake.lexicon_calls == ["en"]  # nothing rebuilt

    both = build_assets(tmp_path, ("it", "de"))
    assert fake.corpus_calls[-1] == ["de"] and both.languages == ("de", "en", "it")
    forced = build_assets(tmp_path, ("it",), force=True)
    assert fake.model_calls == 2 and fake.corpus_calls[-1] == ["en", "it"]
    assert forced.languages == ("de", "en", "it") and forced.verify() == []  # de kept, not rebuilt
    assert not list(tmp_path.glob(".build-*")) and not list(tmp_path.glob(".retired-*"))


def test_interrupted_build_leaves_nothing_half_written(tmp_path, monkeypatch):
    failing = FakeBuilders(fail_in_corpora=True)
    monkeypatch.setattr(asset_builders, "build_model", failing.build_model)
    monkeypatch.setattr(asset_builders, "build_corpora", failing.build_corpora)
    with pytest.raises(RuntimeError, match="interrupted"):
        build_assets(tmp_path, ("it",))
    assert not (tmp_path / "manifest.json").exists()
    assert not (tmp_path / "corpora").exists()
    assert not list(tmp_path.glob(".build-*"))
    with pytest.raises(AssetsNotBuilt, match="not built"):
        load_assets(tmp_path)


def test_load_errors_name_the_fix(tmp_path, fake):
    with pytest.raises(AssetsNotBuilt, match=r"embedded assets are not built under .*: run `vocadapt assets`"):
        load_assets(tmp_path)
    assets = build_assets(tmp_path, ("it",))
    with pytest.raises(AssetsNotBuilt, match=r"run `vocadapt assets --lang fr`"):
        load_assets(tmp_path, ("fr",))
    with pytest.raises(AssetsNotBuilt, match=r"--lang fr"):
        assets.corpus("fr", "train")
    with pytest.raises(ValueError, match="unknown split"):
        assets.corpus("it", "dev")
    (tmp_path / "corpora" / "it" / "test.txt").write_text("changed\n", encoding="utf-8")
    assert assets.verify() == ["corpora/it/test.txt: changed since the build"]
    (tmp_path / "corpora" / "it" / "test.txt").unlink()
    with pytest.raises(AssetsNotBuilt, match="incomplete .* --force"):
        load_assets(tmp_path)


def test_unknown_language_refused_before_any_work(tmp_path, fake):
    with pytest.raises(asset_builders.UserError, match="no embedded corpus for xx"):
        build_assets(tmp_path, ("xx",))
    with pytest.raises(asset_builders.UserError, match="lid.176 cannot recognise om"):
        build_assets(tmp_path, ("om",))
    assert fake.model_calls == 0


def test_cli_builds_and_reports(tmp_path, fake):
    result = CliRunner().invoke(app, ["assets", "--home", str(tmp_path), "--lang", "it"])
    assert result.exit_code == 0, result.output
    assert "corpora/it/train.txt" in result.output and "model:" in result.output
    bad = CliRunner().invoke(app, ["assets", "--home", str(tmp_path), "--lang", "klingon"])
    assert bad.exit_code == 2 and "no embedded corpus for klingon" in bad.output


def test_without_apt_the_bible_alone_serves_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.setattr(asset_builders.shutil, "which", lambda name: None)
    console = asset_builders.Console(record=True, width=200)
    built = asset_builders.build_corpora(["en", "it"], tmp_path / "downloads", tmp_path / "work", console)
    assert any("Bibles alone" in warning for warning in built.warnings)
    assert built.corpora["it"]["sources"] == ["bible-diodati"] and built.corpora["en"]["sources"] == ["bible-web"]
    assert "libreoffice-help" not in built.sources and built.sources["bible-diodati"]["licence"] == "public domain"
    train = (tmp_path / "work" / "corpora" / "it" / "train.txt").read_text(encoding="utf-8").splitlines()
    test = (tmp_path / "work" / "corpora" / "it" / "test.txt").read_text(encoding="utf-8").splitlines()
    assert 27_000 < len(train) < 28_500 and 1_200 < len(test) < 1_900 and not set(train) & set(test)
    parallel_test = tmp_path / "work" / "corpora" / "parallel" / "it-en" / "test.jsonl"
    pairs = parallel_test.read_text(encoding="utf-8").splitlines()
    first = json.loads(pairs[0])
    assert set(first) == {"key", "source", "en", "it"} and first["it"] == test[0]

    again = asset_builders.build_corpora(["it"], tmp_path / "downloads", tmp_path / "again", console)
    assert again.corpora["it"] == built.corpora["it"]
    for relative in ("corpora/it/train.txt", "corpora/it/test.txt", "corpora/parallel/it-en/validation.jsonl"):
        assert (tmp_path / "again" / relative).read_bytes() == (tmp_path / "work" / relative).read_bytes()


def test_missing_word_list_is_recorded_not_fatal(tmp_path, fake):
    """Without apt the English word list is skipped with a reason (expansion then protects the corpus alone), and
    the next build tries the download again."""
    fake.lexicon_missing = True
    assets = build_assets(tmp_path, ("it",))
    assert assets.lexicon("en") is None
    assert "offline" in assets.manifest["lexicons"]["en"]["missing"]
    fake.lexicon_missing = False  # the download works the next time: a failed one is tried again, not cached
    assets = build_assets(tmp_path, ("it",))
    assert fake.lexicon_calls == ["en", "en"] and fake.model_calls == 1 and len(fake.corpus_calls) == 1
    assert assets.lexicon("en").read_text(encoding="utf-8") == "colour\ncolor\n" and assets.verify() == []
    build_assets(tmp_path, ("it",))
    assert fake.lexicon_calls == ["en", "en"]  # once written, it is kept


def test_an_older_build_gains_its_word_list(tmp_path, fake):
    build_assets(tmp_path, ("it",))
    manifest_path = tmp_path / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    del manifest["lexicons"]
    manifest["files"].pop("lexicons/en.txt")
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    assets = build_assets(tmp_path, ("it",))
    assert fake.model_calls == 1 and len(fake.corpus_calls) == 1 and fake.lexicon_calls == ["en", "en"]
    assert assets.lexicon("en").read_text(encoding="utf-8") == "colour\ncolor\n" and assets.verify() == []
