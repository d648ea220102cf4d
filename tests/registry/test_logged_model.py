"""A registered version is an MLflow 3 model, against a real `mlflow server` over HTTP on loopback: a LoggedModel with
its metrics and corpus linked, loadable with `mlflow.pyfunc.load_model("models:/NAME@champion")`, served by the real
`mlflow models serve` command, with its checkpoint logged once (inside the MLflow model, not beside it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.registry.tiny_registry_world import build_tiny_model, credentials, lineage, log_adapted_runs

NAME = "vocadapt-it-logged"
PROMPT = "La capitale d'Italia è"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A real server; one tiny model registered through vocadapt's registry and promoted to champion.
    Returns (server URL, Registered, the producing run id, the checkpoint as it was before registration)."""
    import shutil

    import mlflow

    from tests.mlflow_server import mlflow_server
    from vocadapt.platform.registry.model_versions import promote, register_model
    from vocadapt.platform.tracking import Tracker

    folder = tmp_path_factory.mktemp("logged-model-server")
    model_dir = build_tiny_model(folder / "model")
    original = shutil.copytree(model_dir, folder / "original")
    with credentials(None, None), mlflow_server(folder) as url:
        tracker = Tracker(url, "logged-model-tests")
        _, child = log_adapted_runs(tracker)
        registered = register_model(tracker, child, model_dir, NAME, lineage=lineage())
        assert promote(mlflow.tracking.MlflowClient(url, registry_uri=url), NAME, registered.version).accepted
        previous = mlflow.get_tracking_uri()
        mlflow.set_tracking_uri(url)
        mlflow.set_registry_uri(url)
        try:
            yield url, registered, child, original
        finally:
            mlflow.set_tracking_uri(previous)
            mlflow.set_registry_uri(previous)


def test_the_version_is_a_logged_model_with_its_metrics_and_corpus(world):
    import mlflow

    url, registered, run_id, _ = world
    client = mlflow.MlflowClient(url, registry_uri=url)
    version = client.get_model_version_by_alias(NAME, "champion")
    assert version.source == f"models:/{registered.logged_model_id}"
    assert version.tags["vocadapt.logged_model_id"] == registered.logged_model_id
    experiment = client.get_experiment_by_name("logged-model-tests").experiment_id
    found = mlflow.search_logged_models(experiment_ids=[experiment], output_format="list")
    assert [model.model_id for model in found] == [registered.logged_model_id]
    model = found[0]
    assert model.source_run_id == run_id and model.tags["vocadapt.method"] == "fvt"
    metrics = {metric.key: metric for metric in model.metrics}
    assert metrics["bpb_target_after_lapt"].value == pytest.approx(1.9)  # the child run's
    assert metrics["source_model.bpb_target"].value == pytest.approx(2.0)  # its parent's, as the gates read them
    linked = {m.key for m in model.metrics if (m.dataset_name, m.dataset_digest) == ("corpora", ("cd" * 32)[:16])}
    assert linked == set(metrics)  # every metric is linked to the corpora the model was adapted on
    inputs = client.get_run(run_id).inputs
    assert [d.dataset.name for d in inputs.dataset_inputs] == ["corpora"]
    assert [m.model_id for m in inputs.model_inputs] == [registered.logged_model_id]
    assert client.get_run(run_id).data.tags["vocadapt.serve_check"] == "passed"


def test_the_checkpoint_is_logged_once_as_safetensors_inside_the_mlflow_model(world, tmp_path):
    import mlflow

    url, registered, run_id, _ = world

    def files(list_artifacts, path=None):
        for entry in list_artifacts(path):
            yield from files(list_artifacts, entry.path) if entry.is_dir else [entry.path]

    client = mlflow.MlflowClient(url)
    run_files = list(files(lambda path: client.list_artifacts(run_id, path)))
    assert not [name for name in run_files if name.endswith(".safetensors")], run_files
    local = Path(mlflow.artifacts.download_artifacts(f"models:/{NAME}@champion", dst_path=str(tmp_path)))
    model_files = [str(path.relative_to(local)) for path in local.rglob("*") if path.is_file()]
    assert [name for name in model_files if name.endswith(".safetensors")] == ["artifacts/model/model.safetensors"]
    assert "MLmodel" in model_files and "pyfunc_entry.py" in model_files
    assert not [name for name in model_files if name.endswith((".pkl", ".pickle", ".bin", ".pt"))], model_files


def _greedy_mismatch(original: Path, prompt: str, answer: str, max_new_tokens: int) -> str | None:
    """What differs between a served answer and transformers' greedy decode of the checkpoint as registered."""
    from vocadapt.platform.model_loading import load_checkpoint_tokenizer
    from vocadapt.platform.serving.serve_check import greedy_decode, served_answer_mismatch

    expected = greedy_decode(original, prompt, max_new_tokens)
    return served_answer_mismatch(load_checkpoint_tokenizer(original), expected, answer)


def test_pyfunc_loads_the_champion_and_generates_what_transformers_generates(world):
    import mlflow

    _, _, _, original = world
    loaded = mlflow.pyfunc.load_model(f"models:/{NAME}@champion")
    predicted = loaded.predict([PROMPT, "Il gatto"], params={"max_new_tokens": 6})
    assert len(predicted) == 2
    for prompt, answer in zip([PROMPT, "Il gatto"], predicted, strict=True):
        assert _greedy_mismatch(original, prompt, answer, 6) is None
    assert _greedy_mismatch(original, PROMPT, predicted[1], 6)  # the comparison tells two answers apart


def test_mlflow_models_serve_answers_a_completion_on_loopback(world, tmp_path):
    """The real command, as the model card says: `mlflow models serve -m models:/NAME@champion --env-manager local`
    (uvicorn is run by name, so the venv's bin is on PATH; MLFLOW_TRACKING_URI resolves the alias)."""
    import requests

    from tests.mlflow_server import free_port

    url, _, _, _ = world
    port = free_port()
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "MLFLOW_TRACKING_URI": url, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("MLFLOW_TRACKING_USERNAME", None)
    env.pop("MLFLOW_TRACKING_PASSWORD", None)
    log = open(tmp_path / "serve.log", "wb")
    process = subprocess.Popen([str(bin_dir / "mlflow"), "models", "serve", "-m", f"models:/{NAME}@champion",
                                "--env-manager", "local", "--host", "127.0.0.1", "--port", str(port)],
                               stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while True:
            assert process.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            try:
                if requests.get(f"http://127.0.0.1:{port}/ping", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()[-3000:]
            time.sleep(1)
        response = requests.post(f"http://127.0.0.1:{port}/invocations", timeout=120,
                                 json={"inputs": [PROMPT], "params": {"max_new_tokens": 5}})
        assert response.status_code == 200, response.text
        predictions = response.json()["predictions"]
        assert len(predictions) == 1
        assert _greedy_mismatch(world[3], PROMPT, predictions[0], 5) is None, predictions
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        log.close()


def test_vocadapt_serve_finds_the_checkpoint_whatever_the_process_wide_tracking_uri(world, tmp_path):
    """`vocadapt serve` and `evaluate` pass the store's URI; mlflow resolves models:/<model_id> against the
    process-wide one, which here names another store."""
    import mlflow

    from vocadapt.platform.serving.registered import download_verified

    url, registered, _, _ = world
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'another-store.db'}")
    try:
        client = mlflow.MlflowClient(url, registry_uri=url)
        model = download_verified(client, f"models:/{NAME}@champion", tmp_path / "served", url)
    finally:
        mlflow.set_tracking_uri(url)
    assert model.version == registered.version and (model.model_dir / "model.safetensors").is_file()
    assert (model.model_dir / "vocadapt-manifest.json").is_file() and not (model.model_dir / "MLmodel").exists()
