"""`vocadapt serve`: a registered model's files are verified before anything starts; the champion answers over HTTP.

The HTTP test needs the vLLM serving environment (`vocadapt evaluate --serving-venv-only` builds it); without it that
test is skipped and says so. The refusal tests need no vLLM: a server must never be started for them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.registry.tiny_registry_world import build_tiny_model, lineage, log_adapted_runs
from vocadapt.cli.app import app

NAME = "vocadapt-it-served"
PROMPT = "La capitale d'Italia è"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"), head_dim=64)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One local tracking store and registry for the module; returns (uri, tracker, folder)."""
    from vocadapt.platform.tracking import Tracker

    folder = tmp_path_factory.mktemp("store")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    return uri, Tracker(uri, "serving-tests", artifact_root=folder / "artifacts"), folder


@pytest.fixture()
def registry(store, tiny_model, tmp_path):
    """A fresh version of the tiny model, promoted to champion; returns (uri, stored artifact folder)."""
    import mlflow

    from vocadapt.platform.registry.mlflow_model import checkpoint_dir
    from vocadapt.platform.registry.model_versions import promote, register_model

    uri, tracker, folder = store
    model_dir = tmp_path / "model"
    shutil.copytree(tiny_model, model_dir)
    _, child = log_adapted_runs(tracker)
    registered = register_model(tracker, child, model_dir, NAME, lineage=lineage())
    client = mlflow.tracking.MlflowClient(uri, registry_uri=uri)
    assert promote(client, NAME, registered.version).accepted
    # the checkpoint as stored: inside the MLflow model (a LoggedModel) the version points at
    logged = client.get_logged_model(registered.logged_model_id)
    stored = checkpoint_dir(Path(logged.artifact_location.removeprefix("file://")))
    assert (stored / "model.safetensors").is_file()
    return uri, stored


@pytest.fixture()
def no_server(monkeypatch):
    """Fail the test if anything tries to start vLLM."""
    from vocadapt.platform.evaluation import serving

    def refuse(*args, **kwargs):
        raise AssertionError("a server was started for a refused model")

    monkeypatch.setattr(serving.VllmServer, "__enter__", refuse)


def _serve(args, tmp_path):
    return CliRunner().invoke(app, ["serve", *args, "--download-dir", str(tmp_path / "served")],
                              catch_exceptions=False)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda stored: (stored / "tokenizer.json").unlink(), "tokenizer"),
        (lambda stored: (stored / "tokenizer_config.json").unlink(), "tokenizer_config.json"),
        (lambda stored: (stored / "model.safetensors").write_bytes(
            (stored / "model.safetensors").read_bytes()[:-4] + b"\0\0\0\0"), "model.safetensors fails its sha256"),
        (lambda stored: (stored / "pytorch_model.bin").write_bytes(b"pickle"), "pickled files"),
        (lambda stored: (stored / "vocadapt-manifest.json").write_text('{"format": 1, "files": {}}'),
         "differs from the one recorded at registration"),
    ],
    ids=["tokenizer.json missing", "tokenizer_config missing", "weights tampered", "pickle added",
         "manifest rewritten"],
)
def test_a_damaged_model_is_refused_and_no_server_starts(registry, no_server, tmp_path, damage, message):
    uri, stored = registry
    damage(stored)
    result = _serve([f"models:/{NAME}@champion", "--tracking-uri", uri], tmp_path)
    assert result.exit_code == 2, result.output
    assert "refused" in result.output and message in " ".join(result.output.split())
    assert not (tmp_path / "served").exists() and not list(tmp_path.glob(".served*"))


def test_an_intact_champion_passes_verification(registry, no_server, tmp_path):
    uri, _ = registry
    result = _serve([f"models:/{NAME}@champion", "--tracking-uri", uri, "--check-only"], tmp_path)
    assert result.exit_code == 0, result.output
    assert "verified" in result.output and (tmp_path / "served" / "model.safetensors").is_file()


@pytest.mark.parametrize("uri, message", [("models:/nope@champion", "does not resolve"),
                                          ("runs:/abc/model", "not a registered model URI")])
def test_unknown_models_are_refused_clearly(registry, no_server, tmp_path, uri, message):
    result = _serve([uri, "--tracking-uri", registry[0]], tmp_path)
    assert result.exit_code == 2 and message in result.output


def test_the_champion_completes_an_italian_prompt_over_http(registry, tiny_model, tmp_path):
    """`vocadapt serve` as a user runs it: prints the endpoint once healthy, answers what transformers' greedy decode
    of the same checkpoint answers (the same prompt ids, the same first tokens, the same text; an answer from other
    weights would be refused), and stops vLLM when it is stopped itself (SIGTERM, as a process manager or `kill`
    stops it: the server must not be left orphaned)."""
    import re
    import signal
    import subprocess
    import sys

    import requests

    from vocadapt.platform.evaluation.serving import serving_venv_dir, serving_venv_ready
    from vocadapt.platform.model_loading import load_checkpoint_tokenizer
    from vocadapt.platform.serving.serve_check import greedy_decode, served_answer_mismatch

    if not serving_venv_ready():
        pytest.skip(f"no vLLM serving environment at {serving_venv_dir()} (build it with "
                    "`vocadapt evaluate --serving-venv-only`)")
    uri, _ = registry
    command = [str(Path(sys.executable).with_name("vocadapt")), "serve", f"models:/{NAME}@champion",
               "--tracking-uri", uri, "--download-dir", str(tmp_path / "served"), "--max-model-len", "128"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for line in process.stdout:
            lines.append(line)
            found = re.search(r"serving (\S+) \(version \d+\) at (http://127\.0\.0\.1:\d+/v1)", line)
            if found:
                break
        assert found, "".join(lines)[-3000:]
        served_name, base_url = found.groups()
        assert served_name == NAME
        assert requests.get(f"{base_url}/models", timeout=10).json()["data"][0]["id"] == NAME
        response = requests.post(f"{base_url}/completions", timeout=120, json={
            "model": served_name, "prompt": PROMPT, "max_tokens": 8, "temperature": 0, "return_token_ids": True})
        assert response.status_code == 200, response.text
        answer = response.json()["choices"][0]
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{base_url}/health", timeout=5)
    tokenizer = load_checkpoint_tokenizer(tiny_model)
    assert answer["prompt_token_ids"] == tokenizer(PROMPT)["input_ids"]
    expected = greedy_decode(tiny_model, PROMPT, 8)
    assert served_answer_mismatch(tokenizer, expected, answer["text"], answer["token_ids"]) is None, answer
    assert answer["token_ids"] == expected and response.json()["usage"]["completion_tokens"] == len(expected)
    other = shutil.copytree(tiny_model, tmp_path / "other-weights")
    _other_weights(other)
    assert served_answer_mismatch(tokenizer, greedy_decode(other, PROMPT, 8), answer["text"], answer["token_ids"])


def _other_weights(model_dir: Path) -> None:
    """The checkpoint with other weights: an answer served from it must not pass for the champion's."""
    import torch
    from safetensors.torch import load_file, save_file

    generator = torch.Generator().manual_seed(1)
    weights = {name: tensor + torch.randn(tensor.shape, generator=generator) * tensor.std()
               for name, tensor in load_file(model_dir / "model.safetensors").items()}
    save_file(weights, model_dir / "model.safetensors", metadata={"format": "pt"})


