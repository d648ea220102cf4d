"""The sweep's shared artefacts: keys hash exactly the inputs that fix an artefact, concurrent writers leave one
whole entry, and an adapt run that reuses a cached tokenizer, source bits per byte and fastText helper gives the
same bytes as one that computed them (and as a run without a cache)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from tests.pipelines.tiny_world import build_source_model, tiny_config_overrides
from vocadapt.platform.config import ExperimentConfig, apply_override
from vocadapt.platform.assets.sources import ResolvedInputs
from vocadapt.platform.sweeps.cache import (
    COMPUTED, REUSED, ArtefactCache, cache_key, expectation_inputs, helper_inputs, source_bpb_inputs,
    tokenizer_inputs,
)

# ------------------------------------------------------------------------------------------------------- keys


def _world(tmp_path: Path, train_text: str = "ciao mondo\n") -> tuple[Path, ResolvedInputs]:
    files = {}
    for name, text in (("it.train", train_text), ("it.validation", "buongiorno\n"), ("en.train", "hello\n"),
                       ("en.validation", "good morning\n")):
        files[name] = tmp_path / f"{name}.txt"
        files[name].write_text(text, encoding="utf-8")
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text("{}", encoding="utf-8")
    inputs = ResolvedInputs(str(model), (files["it.train"],), (files["it.validation"],), (files["en.train"],),
                            (files["en.validation"],), embedded=False)
    return model, inputs


def _config(model: Path, inputs: ResolvedInputs, *overrides: str) -> ExperimentConfig:
    tree: dict = {}
    for assignment in (f"source.model={model}", "target.language=it", f"corpus.train=[{inputs.target_train[0]}]",
                       f"corpus.validation=[{inputs.target_validation[0]}]", "tokenizer.vocab_size=4096",
                       "init.methods=[fvt]", *overrides):
        apply_override(tree, assignment)
    return ExperimentConfig.model_validate(tree)


def _keys(config: ExperimentConfig, inputs: ResolvedInputs) -> dict[str, str]:
    from vocadapt.platform.sweeps.cache import source_model_identity

    source = source_model_identity(config, inputs.source_model)
    return {"tokenizer": cache_key("tokenizer", tokenizer_inputs(config, inputs, source)),
            "source_bpb": cache_key("source_bpb", source_bpb_inputs(config, inputs, source)),
            "helper": cache_key("helper", helper_inputs(config, inputs, "tokenizer-sha")),
            "corpus_expectations": cache_key("corpus_expectations", expectation_inputs(config, inputs))}


def test_keys_ignore_what_does_not_change_the_artefact(tmp_path):
    model, inputs = _world(tmp_path)
    base = _keys(_config(model, inputs), inputs)
    for override in ("init.methods=[sava]", "lapt.learning_rate=0.001", "name=other", "output_dir=elsewhere",
                     "tracking.experiment=other", "lapt.max_steps=7"):
        assert _keys(_config(model, inputs, override), inputs) == base, override
    # the source model's bits per byte do not depend on the target tokenizer either
    assert _keys(_config(model, inputs, "tokenizer.vocab_size=8192"), inputs)["source_bpb"] == base["source_bpb"]
    # nor do the corpus expectations, which depend on the corpora and the corpus section's bounds alone
    for override in ("tokenizer.vocab_size=8192", "evaluation.max_documents=7", "corpus.language_check_lines=50"):
        changed = _keys(_config(model, inputs, override), inputs)
        assert changed["corpus_expectations"] == base["corpus_expectations"], override


def test_keys_change_with_what_changes_the_artefact(tmp_path):
    model, inputs = _world(tmp_path)
    base = _keys(_config(model, inputs), inputs)
    assert _keys(_config(model, inputs, "tokenizer.vocab_size=8192"), inputs)["tokenizer"] != base["tokenizer"]
    assert _keys(_config(model, inputs, "tokenizer.min_frequency=3"), inputs)["tokenizer"] != base["tokenizer"]
    assert _keys(_config(model, inputs, "seed=1"), inputs)["tokenizer"] != base["tokenizer"]
    assert _keys(_config(model, inputs, "evaluation.max_documents=7"), inputs)["source_bpb"] != base["source_bpb"]
    assert _keys(_config(model, inputs, "init.helper=fasttext:dim=8"), inputs)["helper"] != base["helper"]
    for override in ("corpus.max_duplicate_share=0.5", "corpus.max_line_chars=100", "corpus.min_lines=5",
                     "corpus.min_language_share=0.5", "corpus.expectation_lines=100", "seed=1",
                     "target.source_language=de"):
        changed = _keys(_config(model, inputs, override), inputs)
        assert changed["corpus_expectations"] != base["corpus_expectations"], override
    # same file names, other training text: the tokenizer and the helper change, the held-out score does not
    other = tmp_path / "other"
    other.mkdir()
    _, changed = _world(other, train_text="ciao a tutti\n")
    changed_keys = _keys(_config(model, changed), changed)
    assert changed_keys["tokenizer"] != base["tokenizer"] and changed_keys["helper"] != base["helper"]
    assert changed_keys["source_bpb"] == base["source_bpb"]
    assert changed_keys["corpus_expectations"] != base["corpus_expectations"]
    # other source model bytes: both the tokenizer (it copies its special tokens) and the score change
    (model / "config.json").write_text('{"hidden_size": 32}', encoding="utf-8")
    moved = _keys(_config(model, inputs), inputs)
    assert moved["tokenizer"] != base["tokenizer"] and moved["source_bpb"] != base["source_bpb"]
    assert moved["corpus_expectations"] == base["corpus_expectations"]  # the corpora alone are validated


# ------------------------------------------------------------------------------------------ concurrent writers


def _race(root: str, barrier, results, index: int) -> None:
    def build(folder: Path) -> None:
        (folder / "part-1.txt").write_text("the same bytes\n", encoding="utf-8")
        barrier.wait()  # every writer has built its copy before any renames it into place
        (folder / "part-2.txt").write_text("written by every writer\n", encoding="utf-8")

    cache = ArtefactCache(Path(root))
    entry = cache.entry("tokenizer", {"vocab_size": 4096}, build)
    results[index] = (str(entry), cache.events["tokenizer"], sorted(p.name for p in entry.iterdir()))


def test_concurrent_writers_leave_one_whole_entry(tmp_path):
    context = multiprocessing.get_context("fork")
    writers = 3
    barrier, results = context.Barrier(writers), context.Manager().dict()
    processes = [context.Process(target=_race, args=(str(tmp_path), barrier, results, i)) for i in range(writers)]
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    assert [process.exitcode for process in processes] == [0] * writers
    entries = {results[i][0] for i in range(writers)}
    assert len(entries) == 1
    entry = Path(entries.pop())
    assert all(results[i][2] == ["inputs.json", "part-1.txt", "part-2.txt"] for i in range(writers))
    assert (entry / "part-2.txt").read_text(encoding="utf-8") == "written by every writer\n"
    assert list(entry.parent.iterdir()) == [entry]  # the losers' staging folders are gone
    # every writer built (none could see an entry yet); a later reader reuses without building
    assert {results[i][1] for i in range(writers)} == {COMPUTED}
    later = ArtefactCache(tmp_path)
    assert later.entry("tokenizer", {"vocab_size": 4096}, lambda folder: pytest.fail("rebuilt")) == entry
    assert later.events == {"tokenizer": REUSED}


def test_a_failed_build_leaves_no_entry(tmp_path):
    cache = ArtefactCache(tmp_path)

    def broken(folder: Path) -> None:
        (folder / "half.txt").write_text("half", encoding="utf-8")
        raise RuntimeError("training failed")

    with pytest.raises(RuntimeError):
        cache.entry("tokenizer", {"vocab_size": 4096}, broken)
    assert list((tmp_path / "tokenizer").iterdir()) == []


# ------------------------------------------------------------------------------- reuse gives the same bytes


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _model_files(folder: Path) -> dict[str, bytes]:
    """The model's files byte for byte, but config.json without the initialiser's wall-clock record."""
    import json

    files = _files(folder)
    config = json.loads(files.pop("config.json"))
    config["vocadapt_init"].pop("seconds")
    return {**files, "config.json": json.dumps(config, sort_keys=True).encode()}


@pytest.mark.timeout(600)
def test_adapt_reusing_cached_artefacts_gives_the_bytes_of_computing_them(tmp_path, fixture_corpora, monkeypatch):
    from rich.console import Console

    from vocadapt.pipelines.adapt import run_adapt

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    corpora = {key: Path(path) for key, path in fixture_corpora.items()}
    model = build_source_model(tmp_path / "source", [corpora["en.train"]])
    extra = {"init.methods": "[fvt, focus]", "init.helper": "fasttext", "lapt.enabled": "false",
             "tracking.register_best": "false", "tracking.tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}"}

    def adapt(name: str, cache: ArtefactCache | None):
        tree: dict = {}
        for assignment in tiny_config_overrides(model, corpora, tmp_path, **extra, name=name):
            apply_override(tree, assignment)
        result = run_adapt(ExperimentConfig.model_validate(tree), Console(quiet=True), cache=cache)
        tokenizer = _files(result.output_dir / "tokenizer")
        weights = _model_files(result.best.model_dir)
        return tokenizer, weights, result.source_bits_per_byte, {o.method: o.bits_per_byte for o in result.methods}

    first_cache, second_cache = ArtefactCache(tmp_path / "cache"), ArtefactCache(tmp_path / "cache")
    computed = adapt("computed", first_cache)
    reused = adapt("reused", second_cache)
    plain = adapt("plain", None)
    assert first_cache.events == {"corpus_expectations": COMPUTED, "tokenizer": COMPUTED, "source_bpb": COMPUTED,
                                  "helper": COMPUTED}
    assert second_cache.events == {"corpus_expectations": REUSED, "tokenizer": REUSED, "source_bpb": REUSED,
                                   "helper": REUSED}
    assert computed[0] and computed[0] == reused[0] == plain[0]  # tokenizer files, byte for byte
    assert "model.safetensors" in computed[1] and computed[1] == reused[1] == plain[1]  # the best model's files
    assert computed[2] == reused[2] == plain[2] and computed[3] == reused[3] == plain[3]
    assert not (tmp_path / "runs" / "plain" / "cache").exists()
