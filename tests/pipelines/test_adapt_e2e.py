"""End to end: `vocadapt adapt` on a tiny model and the fixture corpora, tracked over HTTP by a real MLflow server;
and bad input failing early with nothing half-written and nothing registered."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.pipelines.bad_input_world import assert_no_mlflow_run
from tests.pipelines.tiny_world import build_source_model, tiny_config_overrides
from vocadapt.cli.app import app

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def corpora(fixture_corpora) -> dict[str, Path]:
    return {key: Path(path) for key, path in fixture_corpora.items()}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, corpora) -> Path:
    folder = tmp_path_factory.mktemp("tiny-source")
    return build_source_model(folder, [corpora["en.train"]])


def _adapt(args: list[str], env: dict[str, str] | None = None):
    old = {key: os.environ.get(key) for key in (env or {})}
    os.environ.update(env or {})
    try:
        return CliRunner().invoke(app, ["adapt", *args], catch_exceptions=False)
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def http_adapt(tiny_adapt_over_http):
    """The tiny adapt tracked by a real MLflow server that the dashboard's browser test reads too
    (tests/conftest.py): (tracking URL, the --json report, its working folder)."""
    return tiny_adapt_over_http


def test_adapt_over_http_registers_candidate_with_lineage(http_adapt):
    import mlflow

    url, report, tmp_path = http_adapt
    # this server's registry, whatever registry URI an earlier test left set in this process
    client = mlflow.tracking.MlflowClient(url, registry_uri=url)
    experiment = client.get_experiment_by_name("tiny-e2e")
    runs = client.search_runs([experiment.experiment_id])
    parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert {r.data.params["method"] for r in children} == {"random", "fvt"}
    assert all(r.info.status == "FINISHED" for r in runs)
    assert parent.data.params["lapt.max_steps"] == "2"
    for child in children:
        assert {"bpb_target_zero_shot", "bpb_source_zero_shot", "bpb_target_after_lapt"} <= set(child.data.metrics)
        history = client.get_metric_history(child.info.run_id, "lapt_loss")
        assert len(history) >= 1
        # the side-by-side benchmark on each method's final model, what the promotion gates read
        assert 0 <= child.data.metrics["benchmark.side_by_side_cloze_it.acc_bytes"] <= 1
        # the same held-out Italian text decoded by both models: a speed-up and the token ratio behind it
        assert child.data.metrics["generation.equal_content_speed_up"] > 0
        assert child.data.metrics["generation.equal_content_token_ratio"] > 0
    metrics = parent.data.metrics
    assert 0 <= metrics["source_model.benchmark.side_by_side_cloze_it.acc_bytes"] <= 1
    assert metrics["fertility.target_tokenizer.it.tokens_per_word"] > 0
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"config.yaml", "fertility.json", "tokenizer", "corpus_checks"} <= artifacts
    # the corpus expectation suite, saved with the run: one record per corpus and expectation, and its counts
    checked = json.loads(Path(mlflow.artifacts.download_artifacts(
        run_id=parent.info.run_id, artifact_path="corpus_checks/expectations.json", tracking_uri=url,
        dst_path=str(tmp_path / "checks"))).read_text())
    corpora_checked = ("target training", "target held-out", "source-language training", "source-language held-out")
    assert checked["success"] and set(checked["corpora"]) == set(corpora_checked)
    assert len(checked["expectations"]) == 4 * 5 and all(r["success"] for r in checked["expectations"])
    rows = {(r["corpus"], r["expectation"]): r for r in checked["expectations"]}
    assert rows[("target training", "expect_table_row_count_to_be_between")]["observed"] == 400
    assert rows[("target training", "expect_table_row_count_to_be_between")]["threshold"] == ">= 20"
    language = rows[("source-language held-out", "expect_column_values_to_be_in_set on language")]
    assert language["measure"] == "share of lines labelled en" and language["threshold"] == ">= 0.6"
    assert metrics["corpus.expectations_evaluated"] == metrics["corpus.expectations_passed"] == 20
    assert all(metrics[f"corpus.{name.replace(' ', '_')}.expectations_passed"] == 5 for name in corpora_checked)

    from vocadapt.platform.registry.mlflow_model import checkpoint_dir

    name, version = report["registered"]
    registered = client.get_model_version_by_alias(name, "candidate")
    assert int(registered.version) == version
    tags = registered.tags
    assert tags["vocadapt.method"] == report["best_method"]
    for key in ("vocadapt.source_model", "vocadapt.tokenizer_sha256", "vocadapt.corpus_sha256",
                "vocadapt.git_commit", "vocadapt.config"):
        assert tags.get(key), key
    earlier_registry = mlflow.get_registry_uri()
    mlflow.set_registry_uri(url)  # models:/ resolves through the process's registry URI
    try:
        local = mlflow.artifacts.download_artifacts(f"models:/{name}@candidate", dst_path=str(tmp_path / "dl"),
                                                    tracking_uri=url)
    finally:
        mlflow.set_registry_uri(earlier_registry)
    assert (Path(local) / "MLmodel").is_file()  # an MLflow model, carrying the checkpoint
    assert list(checkpoint_dir(Path(local)).glob("*.safetensors"))
    assert not list(Path(local).rglob("*.bin")) and not list(Path(local).rglob("*.pkl"))
    out = Path(report["output_dir"])
    assert out.is_dir() and not list(out.parent.glob(".*staging"))


STAGES = {"parent": ("tokenizer", "init", "lapt", "evaluation"), "method": ("init", "lapt", "evaluation")}


def test_adapt_logs_energy_per_stage_and_the_parent_sums_them(http_adapt):
    """Every stage's energy and CO2 on the run where it ran (the methods' initialisation, scoring and LAPT on
    their child runs, LAPT measured in the Ray workers); the parent holds per-stage sums over itself and its
    children, and its total is the sum of its stages."""
    import mlflow

    url, _, tmp_path = http_adapt
    client = mlflow.tracking.MlflowClient(url, registry_uri=url)
    runs = client.search_runs([client.get_experiment_by_name("tiny-e2e").experiment_id])
    parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == 2
    for child in children:
        metrics = child.data.metrics
        for stage in STAGES["method"]:
            assert metrics[f"energy.{stage}.kwh"] > 0 and metrics[f"emissions.{stage}.kg_co2eq"] > 0, stage
        assert "energy.tokenizer.kwh" not in metrics
        assert metrics["energy.total.kwh"] == pytest.approx(sum(metrics[f"energy.{s}.kwh"] for s in STAGES["method"]))
        assert "meters summed: 1" in child.data.tags["vocadapt.energy_mode"]  # LAPT's own reading
    metrics = parent.data.metrics
    for stage in STAGES["parent"]:
        assert metrics[f"energy.{stage}.kwh"] > 0 and metrics[f"emissions.{stage}.kg_co2eq"] > 0, stage
    assert metrics["energy.total.kwh"] == pytest.approx(sum(metrics[f"energy.{s}.kwh"] for s in STAGES["parent"]))
    assert metrics["emissions.total.kg_co2eq"] == pytest.approx(
        sum(metrics[f"emissions.{s}.kg_co2eq"] for s in STAGES["parent"]))
    for stage in ("init", "lapt"):  # the parent's figure covers its children's
        children_sum = sum(c.data.metrics[f"energy.{stage}.kwh"] for c in children)
        # the same terms added in another order may differ in the last bit
        assert metrics[f"energy.{stage}.kwh"] >= children_sum * (1 - 1e-9)
    assert metrics["energy.lapt.kwh"] == pytest.approx(sum(c.data.metrics["energy.lapt.kwh"] for c in children))
    assert parent.data.tags["vocadapt.energy_country"] == "FRA" and parent.data.params["tracking.country_iso_code"] == "FRA"
    assert "cpu:" in parent.data.tags["vocadapt.energy_mode"]
    # codecarbon wrote nothing where the command ran (no emissions.csv, no lock or config files)
    assert not [p for p in tmp_path.rglob("*") if "emission" in p.name or "codecarbon" in p.name]


def _no_output_no_registry(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    assert not runs.exists() or not any(runs.iterdir()), list(runs.iterdir())
    db = tmp_path / "mlflow.db"
    if db.exists():
        import mlflow

        client = mlflow.tracking.MlflowClient(f"sqlite:///{db}")
        assert not client.search_registered_models()


@pytest.mark.parametrize(
    "case, extra, message",
    [
        ("missing corpus", {"corpus.train": "[/nonexistent/it.txt]"}, "does not exist"),
        ("unknown method", {"init.methods": "[fvt, telepathy]"}, "telepathy"),
        ("helper missing", {"init.methods": "[sava]"}, "helper"),
        ("malformed config", {"lapt.max_steps": "many"}, "lapt.max_steps"),
        ("missing word list", {"init.mode": "expand", "tokenizer.protect_lexicon": "/nonexistent/words.txt"},
         "tokenizer.protect_lexicon"),
        ("missing pretrained tokenizer", {"tokenizer.pretrained": "/nonexistent/tokenizer"}, "tokenizer.pretrained"),
        ("unknown grid country", {"tracking.country_iso_code": "XYZ"}, "tracking.country_iso_code"),
    ],
)
def test_bad_input_fails_early(tmp_path, tiny_model, corpora, monkeypatch, case, extra, message):
    monkeypatch.chdir(tmp_path)
    overrides = tiny_config_overrides(tiny_model, corpora, tmp_path, **extra)
    result = _adapt([arg for o in overrides for arg in ("--set", o)], env={"MLFLOW_TRACKING_URI": ""})
    assert result.exit_code == 2, result.output
    assert message in result.output
    _no_output_no_registry(tmp_path)


@pytest.mark.parametrize("case", ["empty", "english as italian"])
def test_bad_corpus_fails_before_training(tmp_path, tiny_model, corpora, monkeypatch, case):
    monkeypatch.chdir(tmp_path)
    bad = tmp_path / "bad.txt"
    bad.write_text("" if case == "empty" else corpora["en.train"].read_text(encoding="utf-8"), encoding="utf-8")
    overrides = tiny_config_overrides(tiny_model, corpora, tmp_path, **{"corpus.train": f"[{bad}]"})
    result = _adapt([arg for o in overrides for arg in ("--set", o)], env={"MLFLOW_TRACKING_URI": ""})
    assert result.exit_code == 2, result.output
    assert str(bad) in result.output or "bad.txt" in result.output
    _no_output_no_registry(tmp_path)


@pytest.mark.parametrize(
    "case, expectation, fix",
    [
        ("repeated lines", "expect_column_proportion_of_unique_values_to_be_between on text",
         "corpus.max_duplicate_share"),
        ("a line too long", "expect_column_value_lengths_to_be_between on text", "corpus.max_line_chars"),
    ],
)
def test_corpus_failing_an_expectation_stops_before_anything_is_written(tmp_path, tiny_model, corpora, monkeypatch,
                                                                        case, expectation, fix):
    """Italian text that passes the file checks (lines, UTF-8, language) but not the expectation suite."""
    monkeypatch.chdir(tmp_path)
    lines = corpora["it.train"].read_text(encoding="utf-8").splitlines()
    if case == "repeated lines":
        lines = [line for line in lines[:100] for _ in range(3)]  # two lines of three repeat one before them
    else:
        lines = [*lines, " ".join(lines[:60])]  # one document far past corpus.max_line_chars
    bad = tmp_path / "it-bad.txt"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    extra = {"corpus.train": f"[{bad}]", "corpus.max_line_chars": "2000"}
    overrides = tiny_config_overrides(tiny_model, corpora, tmp_path, **extra)
    result = _adapt([arg for o in overrides for arg in ("--set", o)], env={"MLFLOW_TRACKING_URI": ""})
    assert result.exit_code == 2, result.output
    output = " ".join(result.output.split())
    assert "corpus expectation failed: target training" in output and expectation in output and fix in output
    assert "source-language" not in output.split("corpus expectation failed")[1]  # only the failing corpus is named
    _no_output_no_registry(tmp_path)
    assert_no_mlflow_run(tmp_path, registry=False)


def test_assets_not_built(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VOCADAPT_HOME", str(tmp_path / "empty-home"))
    result = _adapt(["--set", f"output_dir={tmp_path / 'runs'}", "--set", "target.language=it"],
                    env={"MLFLOW_TRACKING_URI": ""})
    assert result.exit_code == 2, result.output
    assert "vocadapt assets" in result.output
    _no_output_no_registry(tmp_path)


@pytest.mark.parametrize("top_k", [None, 40])
def test_adapt_expand_mode_keeps_source_rows(tmp_path, tiny_model, corpora, monkeypatch, top_k):
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    monkeypatch.chdir(tmp_path)
    summary = tmp_path / "summary.json"
    lexicon = sorted({word.strip(".,;:()«»\"'") for line in corpora["en.validation"].read_text(encoding="utf-8")
                      .splitlines() for word in line.split()} - {""})  # fmt: skip
    (tmp_path / "words.txt").write_text("\n".join(lexicon), encoding="utf-8")
    extra = {"init.mode": "expand", "lapt.enabled": "false", "tracking.register_best": "false",
             "tokenizer.expand_top_k": "null" if top_k is None else str(top_k),
             "tokenizer.protect_lexicon": str(tmp_path / "words.txt")}
    overrides = tiny_config_overrides(tiny_model, corpora, tmp_path, **extra)
    result = _adapt([*[a for o in overrides for a in ("--set", o)], "--json", str(summary)],
                    env={"MLFLOW_TRACKING_URI": ""})
    assert result.exit_code == 0, result.output
    report = json.loads(summary.read_text())
    model_dir = Path(report["output_dir"]) / report["best_method"] / "initialised"
    source_rows = load_file(str(tiny_model / "model.safetensors"))["model.embed_tokens.weight"]
    adapted = load_file(str(model_dir / "model.safetensors"))["model.embed_tokens.weight"]
    assert adapted.shape[0] > source_rows.shape[0]
    if top_k is not None:
        assert adapted.shape[0] - source_rows.shape[0] <= top_k * 2  # k tokens plus the intermediates they need
    assert (adapted[: source_rows.shape[0]] == source_rows).all()  # every source row kept exactly
    source_tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    adapted_tokenizer = AutoTokenizer.from_pretrained(model_dir)
    # source-language training text (protected by tokenizer.protect_lines) tokenizes exactly as before
    english = corpora["en.train"].read_text(encoding="utf-8").splitlines()[:50]
    changed = [line for line in english if source_tokenizer(line)["input_ids"] != adapted_tokenizer(line)["input_ids"]]
    assert not changed
    # and so does every word of the protected word list, after a space and capitalised
    words = [f" {word.capitalize()}" for word in lexicon]
    assert source_tokenizer(words)["input_ids"] == adapted_tokenizer(words)["input_ids"]


def test_adapt_helper_methods_share_one_fasttext_helper(tmp_path, tiny_model, corpora, monkeypatch):
    from vocadapt.components.helpers import fasttext_helper

    monkeypatch.chdir(tmp_path)
    trained = []
    real = fasttext_helper.train_fasttext_helper

    def counting(*args, **kwargs):
        trained.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(fasttext_helper, "train_fasttext_helper", counting)
    summary = tmp_path / "summary.json"
    extra = {"init.methods": "[focus, sava, clp]", "init.helper": "fasttext", "lapt.enabled": "false",
             "tracking.register_best": "false"}
    overrides = tiny_config_overrides(tiny_model, corpora, tmp_path, **extra)
    result = _adapt([*[a for o in overrides for a in ("--set", o)], "--json", str(summary)],
                    env={"MLFLOW_TRACKING_URI": ""})
    assert result.exit_code == 0, result.output
    report = json.loads(summary.read_text())
    assert set(report["methods"]) == {"focus", "sava", "clp"}
    assert len(trained) == 1  # one helper for the whole run, not one per method


def test_adapt_uses_a_pretrained_target_tokenizer_instead_of_training_one(tmp_path, tiny_model, corpora, monkeypatch):
    """tokenizer.pretrained (SAVA's setting: Minerva's tokenizer): the adapted model speaks exactly that vocabulary,
    whatever tokenizer.vocab_size says, and nothing is trained."""
    from transformers import AutoTokenizer

    from vocadapt.components.tokenizers import train as tokenizer_training

    monkeypatch.chdir(tmp_path)
    spec = tokenizer_training.TokenizerTrainingSpec("bytelevel-bpe", 450, min_frequency=2, seed=1,
                                                    like=AutoTokenizer.from_pretrained(tiny_model))
    pretrained = tokenizer_training.train_tokenizer([corpora["it.train"]], spec, tmp_path / "pretrained",
                                                    show_progress=False)
    monkeypatch.setattr(tokenizer_training, "train_tokenizer", lambda *a, **k: pytest.fail("trained a tokenizer"))
    summary = tmp_path / "summary.json"
    extra = {"tokenizer.pretrained": str(tmp_path / "pretrained"), "tokenizer.vocab_size": "600",
             "init.methods": "[fvt]", "lapt.enabled": "false", "tracking.register_best": "false"}
    overrides = tiny_config_overrides(tiny_model, corpora, tmp_path, **extra)
    result = _adapt([*[a for o in overrides for a in ("--set", o)], "--json", str(summary)],
                    env={"MLFLOW_TRACKING_URI": ""})
    assert result.exit_code == 0, result.output
    report = json.loads(summary.read_text())
    adapted = AutoTokenizer.from_pretrained(Path(report["output_dir"]) / "fvt" / "initialised")
    assert set(pretrained.get_vocab()) <= set(adapted.get_vocab())
    assert len(adapted) < 600  # the pretrained vocabulary (450 and the source's special tokens), not vocab_size
    line = corpora["it.validation"].read_text(encoding="utf-8").splitlines()[0]
    assert adapted.tokenize(line) == pretrained.tokenize(line)


def test_adapt_with_energy_off_measures_nothing(tmp_path, tiny_model, corpora, monkeypatch):
    import mlflow

    from vocadapt.platform import energy

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(energy, "_start_tracker", lambda *a: pytest.fail("started a tracker with tracking.energy off"))
    extra = {"init.methods": "[fvt]", "lapt.enabled": "false", "tracking.register_best": "false",
             "tracking.energy": "false", "tracking.country_iso_code": "XYZ"}  # not even checked when off
    overrides = tiny_config_overrides(tiny_model, corpora, tmp_path, **extra)
    result = _adapt([a for o in overrides for a in ("--set", o)], env={"MLFLOW_TRACKING_URI": ""})
    assert result.exit_code == 0, result.output
    client = mlflow.tracking.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("tiny-e2e").experiment_id])
    assert len(runs) == 2
    for run in runs:
        assert not [k for k in run.data.metrics if k.startswith(("energy.", "emissions."))], run.info.run_name
        assert not [k for k in run.data.tags if k.startswith("vocadapt.energy")]
