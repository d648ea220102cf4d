"""Bad input loses nothing and runs nothing unsafe: an existing output folder is refused (or replaced only once the
new one is complete), pickled weights and custom modeling code are never loaded or copied, and credentials in URIs
never reach a param, tag, artifact or printed config. Each refusal exits 2 with a message naming the input, no
traceback, and leaves no folder, no MLflow run and no registry entry."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.pipelines.bad_input_world import assert_no_mlflow_run
from tests.pipelines.tiny_world import build_source_model, tiny_config_overrides
from vocadapt.cli.app import app

pytestmark = pytest.mark.timeout(600)

SECRET_URI = "s3://KEY:SECRET@bucket/x"
# Fast adapt: one method, no LAPT, no registry (the refusals below happen before any of it would run).
FAST = {"init.methods": "[fvt]", "lapt.enabled": "false", "tracking.register_best": "false",
        "tracking.energy": "false"}


@pytest.fixture(scope="module")
def corpora(fixture_corpora) -> dict[str, Path]:
    return {key: Path(path) for key, path in fixture_corpora.items()}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, corpora) -> Path:
    return build_source_model(tmp_path_factory.mktemp("tiny-source"), [corpora["en.train"]])


@pytest.fixture(scope="module")
def target_tokenizer(tmp_path_factory, corpora) -> Path:
    """A second tiny tokenizer (trained on Italian) for `vocadapt init`."""
    return build_source_model(tmp_path_factory.mktemp("tiny-target"), [corpora["it.train"]], vocab_size=350)


def _invoke(args: list[str], cwd: Path, monkeypatch):
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "")
    return CliRunner().invoke(app, args, catch_exceptions=False)


def _adapt_args(tiny_model: Path, corpora, tmp_path: Path, **extra: str) -> list[str]:
    overrides = tiny_config_overrides(tiny_model, corpora, tmp_path, **(FAST | extra))
    return ["adapt", *[arg for override in overrides for arg in ("--set", override)]]


class _WritesMarker:
    """Unpickling this runs ``open(marker, "w")``: a pickle payload that proves whether it was ever loaded."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('unpickled')",))


def _pickle_only(source: Path, folder: Path, marker: Path, weights: str) -> Path:
    """``source``'s config and tokenizer with pickled weights only (no *.safetensors)."""
    shutil.copytree(source, folder)
    for shard in folder.glob("*.safetensors"):
        shard.unlink()
    (folder / weights).write_bytes(pickle.dumps({"model.embed_tokens.weight": _WritesMarker(marker)}))
    return folder


def _custom_code(source: Path, folder: Path, marker: Path) -> Path:
    """``source`` with ``auto_map`` pointing at modules that write ``marker`` when imported."""
    shutil.copytree(source, folder)
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "configuration_evil.EvilConfig",
                          "AutoModelForCausalLM": "modeling_evil.EvilForCausalLM"}
    (folder / "config.json").write_text(json.dumps(config))
    for module in ("configuration_evil", "modeling_evil"):
        (folder / f"{module}.py").write_text(f"open({str(marker)!r}, 'w').write('imported')\n")
    return folder


def _refused(result, *named: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    output = " ".join(result.output.split())
    for name in named:
        assert name in output, (name, output)


def _command(command: str, model: Path, tiny_model: Path, target_tokenizer: Path, corpora, cwd: Path) -> list[str]:
    if command == "adapt":
        return _adapt_args(model, corpora, cwd)
    if command == "init":
        return ["init", "--source-model", str(model), "--target-tokenizer", str(target_tokenizer), "--method",
                "fvt", "--out", str(cwd / "out")]
    if command == "lapt":
        return ["lapt", "--set", "target.language=it", "--set", f"output_dir={cwd / 'runs'}", "--model", str(model),
                "--output", str(cwd / "out")]
    return ["evaluate", "--model", str(model), "--no-energy", "--work-dir", str(cwd / "out")]


def _nothing_written(cwd: Path) -> None:
    assert not (cwd / "out").exists()
    runs = cwd / "runs"
    assert not runs.exists() or not any(runs.iterdir()), list(runs.rglob("*"))
    assert_no_mlflow_run(cwd)


# ---- 1. never destroy a user's data


def _earlier_results(tmp_path: Path) -> Path:
    folder = tmp_path / "runs" / "tiny" / "it"
    (folder / "fvt" / "model").mkdir(parents=True)
    (folder / "fvt" / "model" / "model.safetensors").write_bytes(b"earlier model")
    (folder / "my-notes.txt").write_text("mine")
    return folder


@pytest.mark.parametrize("second_run", ["same config", "other methods"])
def test_second_adapt_without_overwrite_is_refused_and_keeps_the_earlier_results(
        tmp_path, tiny_model, corpora, monkeypatch, second_run):
    earlier = _earlier_results(tmp_path)
    extra = {} if second_run == "same config" else {"init.methods": "[random]"}
    result = _invoke(_adapt_args(tiny_model, corpora, tmp_path, **extra), tmp_path, monkeypatch)
    _refused(result, str(earlier), "--overwrite", "name")
    assert (earlier / "my-notes.txt").read_text() == "mine"
    assert (earlier / "fvt" / "model" / "model.safetensors").read_bytes() == b"earlier model"
    assert sorted(p.name for p in earlier.parent.iterdir()) == ["it"]  # no staging folder
    assert_no_mlflow_run(tmp_path)


@pytest.mark.parametrize("failure", [RuntimeError, KeyboardInterrupt])
def test_overwrite_keeps_the_old_folder_when_the_run_fails_midway(tmp_path, tiny_model, corpora, monkeypatch,
                                                                  failure):
    from vocadapt.pipelines import adapt

    earlier = _earlier_results(tmp_path)

    def fails(*args, **kwargs):
        assert (earlier / "my-notes.txt").exists()  # mid-run, the old folder is untouched
        raise failure("killed mid-run")

    monkeypatch.setattr(adapt, "_adapt_one_method", fails)
    monkeypatch.setenv("VOCADAPT_HOME", str(tmp_path / "home"))  # where the internal error's log goes
    result = _invoke([*_adapt_args(tiny_model, corpora, tmp_path), "--overwrite"], tmp_path, monkeypatch)
    assert result.exit_code == (130 if failure is KeyboardInterrupt else 1), result.output
    assert (earlier / "my-notes.txt").read_text() == "mine"
    assert (earlier / "fvt" / "model" / "model.safetensors").read_bytes() == b"earlier model"
    assert sorted(p.name for p in earlier.parent.iterdir()) == ["it"]  # the half-built staging folder is gone


def test_overwrite_replaces_the_old_folder_only_once_the_new_one_is_complete(tmp_path, tiny_model, corpora,
                                                                              monkeypatch):
    from vocadapt.pipelines import adapt

    earlier = _earlier_results(tmp_path)
    run, seen = adapt._run, []

    def whole_run(*args, **kwargs):
        result = run(*args, **kwargs)
        seen.append((earlier / "my-notes.txt").exists())  # everything done and logged: the old one still there
        return result

    monkeypatch.setattr(adapt, "_run", whole_run)
    result = _invoke([*_adapt_args(tiny_model, corpora, tmp_path), "--overwrite"], tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    assert seen == [True]
    assert not (earlier / "my-notes.txt").exists()
    assert (earlier / "tokenizer" / "tokenizer.json").is_file()
    assert list((earlier / "fvt" / "initialised").glob("*.safetensors"))
    assert sorted(p.name for p in earlier.parent.iterdir()) == ["it"]  # no staging or set-aside folder left


@pytest.mark.parametrize("value, passed", [("true", True), ("false", False), ("", False)])
def test_mlproject_adapt_entry_point_passes_overwrite_only_when_asked(monkeypatch, value, passed):
    import yaml

    from vocadapt.cli import app as app_module
    from vocadapt.cli import mlproject

    project = yaml.safe_load((Path(__file__).parents[2] / "MLproject").read_text())
    assert "--overwrite {overwrite}" in project["entry_points"]["adapt"]["command"]
    assert project["entry_points"]["adapt"]["parameters"]["overwrite"]["default"] == "false"
    commands = []
    monkeypatch.setattr(app_module, "app", lambda command, standalone_mode: commands.append(command))
    mlproject.main(["adapt", "--config", "x.yaml", "--overrides", "name=a", "--overwrite", value])
    assert commands == [["adapt", "x.yaml", "--set", "name=a", *(["--overwrite"] if passed else [])]]


def test_registry_alias_moves_after_the_version_is_fully_logged(tmp_path, monkeypatch, tiny_model):
    """The alias is the last registry write: when it moves, the version's tags and model card already exist."""
    import shutil

    import mlflow

    from vocadapt.platform.registry import model_versions as registry
    from vocadapt.platform.tracking import Tracker

    monkeypatch.chdir(tmp_path)
    tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}", "alias-order")
    model_dir = shutil.copytree(tiny_model, tmp_path / "model")  # a real checkpoint: the registry refuses others
    writes = []
    real_client = registry._registry_client

    def recording_client(uri):
        client = real_client(uri)
        original_alias, original_tag = client.set_registered_model_alias, client.set_model_version_tag

        def alias(*args):
            card = mlflow.artifacts.list_artifacts(run_id=run_id, tracking_uri=tracker.tracking_uri)
            writes.append(("alias", registry.MODEL_CARD in {Path(a.path).name for a in card}))
            return original_alias(*args)

        client.set_registered_model_alias = alias
        client.set_model_version_tag = lambda *args: (writes.append(("tag", True)), original_tag(*args))[1]
        return client

    monkeypatch.setattr(registry, "_registry_client", recording_client)
    with tracker.run("producer") as run:
        run_id = run.info.run_id
    lineage = {key: "x" for key in registry.REQUIRED_LINEAGE}
    registry.register_model(tracker, run_id, model_dir, "alias-order-model", lineage=lineage,
                            options=registry.VersionOptions(alias="candidate"))
    assert writes[-1] == ("alias", True), writes
    assert [kind for kind, _ in writes].count("alias") == 1


# ---- 2. one loader: safetensors only, no custom code


@pytest.mark.parametrize("command", ["adapt", "init", "lapt", "evaluate"])
@pytest.mark.parametrize("weights", ["pytorch_model.bin", "model.pt", "model.pth"])
def test_pickle_only_model_is_refused_and_never_unpickled(tmp_path, tiny_model, target_tokenizer, corpora,
                                                          monkeypatch, command, weights):
    marker = tmp_path / "unpickled.marker"
    model = _pickle_only(tiny_model, tmp_path / "pickled-model", marker, weights)
    result = _invoke(_command(command, model, tiny_model, target_tokenizer, corpora, tmp_path), tmp_path, monkeypatch)
    _refused(result, str(model), weights, "safetensors", "convert")
    assert not marker.exists(), "the pickle was loaded"
    _nothing_written(tmp_path)


@pytest.mark.parametrize("command", ["adapt", "init", "lapt", "evaluate"])
def test_custom_code_model_is_refused_and_its_code_never_runs(tmp_path, tiny_model, target_tokenizer, corpora,
                                                              monkeypatch, command):
    marker = tmp_path / "imported.marker"
    model = _custom_code(tiny_model, tmp_path / "custom-model", marker)
    result = _invoke(_command(command, model, tiny_model, target_tokenizer, corpora, tmp_path), tmp_path, monkeypatch)
    _refused(result, str(model), "auto_map", "source.trust_remote_code")
    assert not marker.exists(), "the custom code was imported"
    assert "trust_remote_code=True" not in result.output  # the config field is named, not transformers' argument
    _nothing_written(tmp_path)


def test_truncated_safetensors_header_is_refused(tmp_path, tiny_model, target_tokenizer, corpora, monkeypatch):
    model = tmp_path / "truncated"
    shutil.copytree(tiny_model, model)
    (model / "model.safetensors").write_bytes((10**6).to_bytes(8, "little") + b'{"a"')
    result = _invoke(_command("init", model, tiny_model, target_tokenizer, corpora, tmp_path), tmp_path, monkeypatch)
    _refused(result, str(model), "model.safetensors", "header")
    _nothing_written(tmp_path)


@pytest.mark.parametrize("link", ["hardlink", "copy"])
def test_surgery_never_copies_custom_code_into_its_output(tmp_path, tiny_model, target_tokenizer, link):
    """Even when called directly on a folder with ``auto_map`` (the CLI refuses it first), the adapted checkpoint
    holds no ``*.py`` and no ``auto_map``, and the code was never imported."""
    from vocadapt.components.surgery import Initialisation, adapt_checkpoint
    from vocadapt.components.surgery.checkpoint import CheckpointWriting

    marker = tmp_path / "imported.marker"
    model = _custom_code(tiny_model, tmp_path / "custom-model", marker)
    out = tmp_path / "adapted"
    adapt_checkpoint(model, target_tokenizer, out, Initialisation("fvt"), writing=CheckpointWriting(link=link))
    assert not list(out.glob("*.py"))
    assert "auto_map" not in json.loads((out / "config.json").read_text())
    assert not marker.exists()


def test_strip_custom_code_removes_code_and_auto_map(tmp_path, tiny_model):
    from vocadapt.platform.model_loading import strip_custom_code

    folder = _custom_code(tiny_model, tmp_path / "saved", tmp_path / "marker")
    strip_custom_code(folder)
    assert not list(folder.glob("*.py"))
    assert "auto_map" not in json.loads((folder / "config.json").read_text())


# ---- 3. secrets never logged


@pytest.mark.parametrize("field, uri, shown", [
    ("lapt.storage_path", SECRET_URI, "s3://***@bucket/x"),
    ("tracking.tracking_uri", "https://KEY:SECRET@mlflow.example:5000", "https://***@mlflow.example:5000"),
])
def test_uri_credentials_never_reach_config_output(tmp_path, monkeypatch, field, uri, shown):
    result = _invoke(["config", "--set", "target.language=it", "--set", f"{field}={uri}"], tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    assert "KEY:SECRET" not in result.output and shown in result.output


def test_uri_credentials_never_reach_an_error_message(tmp_path, monkeypatch):
    result = _invoke(["config", "--set", f"lapt.storage_path={SECRET_URI}"], tmp_path, monkeypatch)  # no language
    _refused(result, "target")
    assert "KEY:SECRET" not in result.output


def test_uri_credentials_never_reach_params_tags_or_config_artifact(tmp_path, tiny_model, corpora, monkeypatch):
    import mlflow

    args = _adapt_args(tiny_model, corpora, tmp_path, **{"lapt.runner": "ray", "lapt.storage_path": SECRET_URI})
    result = _invoke(args, tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    client = mlflow.tracking.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("tiny-e2e").experiment_id])
    assert runs
    for run in runs:
        assert not [v for v in {**run.data.params, **run.data.tags}.values() if "SECRET" in v], run.info.run_name
    parent = next(run for run in runs if "mlflow.parentRunId" not in run.data.tags)
    assert parent.data.params["lapt.storage_path"] == "s3://***@bucket/x"
    config_yaml = Path(mlflow.artifacts.download_artifacts(run_id=parent.info.run_id, artifact_path="config.yaml",
                                                           tracking_uri=client.tracking_uri, dst_path=str(tmp_path / "dl")))
    text = config_yaml.read_text()
    assert "storage_path: s3://***@bucket/x" in text and "SECRET" not in text
    artifacts = tmp_path / "mlartifacts"
    leaked = [p for p in artifacts.rglob("*") if p.is_file() and p.suffix in (".yaml", ".json", ".txt", ".md")
              and "KEY:SECRET" in p.read_text(errors="ignore")]
    assert not leaked, leaked


@pytest.mark.parametrize("opted_in", [False, True])
def test_custom_code_passes_the_check_only_when_the_config_opts_in(tmp_path, tiny_model, opted_in):
    """``source.trust_remote_code: true`` is the one way past the auto_map refusal; the check itself imports
    nothing either way."""
    from vocadapt.components.errors import UserError
    from vocadapt.platform.model_loading import check_model_folder

    marker = tmp_path / "imported.marker"
    model = _custom_code(tiny_model, tmp_path / "custom-model", marker)
    if opted_in:
        check_model_folder(model, what="source.model", trust_remote_code=True)
    else:
        with pytest.raises(UserError, match="source.trust_remote_code"):
            check_model_folder(model, what="source.model")
    assert not marker.exists()
