"""The tiny world the bad-input tests share (module-scoped in each test file that imports ``world``): a tiny model
and tokenizer trained here, the committed corpus slices, and bad files (empty, Latin-1, broken JSON, pickled
weights), plus builders of command lines whose ``{w.*}`` and ``{cwd}`` placeholders name them."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from tests.pipelines.tiny_world import build_source_model, tiny_config_overrides

FAST = {"init.methods": "[fvt]", "lapt.enabled": "false", "tracking.register_best": "false",
        "tracking.energy": "false"}


@dataclass(frozen=True)
class World:
    """Inputs shared by every case; they live outside the case's working folder."""

    model: Path
    target_tokenizer: Path
    corpora: dict[str, Path]
    empty: Path  # a text file with no text
    latin1: Path  # Italian text whose line 3 holds a Latin-1 byte
    small: Path  # 40 lines of one sentence: far fewer pieces than a 5,000-token vocabulary
    bad_json: Path  # a config.json with a syntax error on line 2
    no_model_type: Path  # a config.json without model_type
    broken_tokenizer: Path  # a folder whose tokenizer.json is cut short
    bad_yaml: Path  # an experiment config that is not YAML
    misaligned: Path  # 3 lines, where the corpus has more
    pickled: Path  # the tiny model with pytorch_model.bin instead of safetensors


@pytest.fixture(scope="module")
def world(tmp_path_factory, fixture_corpora) -> World:
    root = tmp_path_factory.mktemp("bad-input-world")
    corpora = {key: Path(path) for key, path in fixture_corpora.items()}
    model = build_source_model(root / "model", [corpora["en.train"]])
    target = build_source_model(root / "target", [corpora["it.train"]], vocab_size=350)
    (root / "empty.txt").write_text("\n\n", encoding="utf-8")
    lines = [line.encode("utf-8") for line in corpora["it.train"].read_text(encoding="utf-8").splitlines()[:60]]
    lines[2] += b" caff\xe8"  # 'caffe' with a Latin-1 grave accent: the one byte that is not UTF-8
    (root / "latin1.txt").write_bytes(b"\n".join(lines))
    (root / "small.txt").write_text("la casa è bella\n" * 40, encoding="utf-8")
    (root / "bad.json").write_text('{"model_type": "llama",\n "hidden_size": }\n', encoding="utf-8")
    (root / "no_type.json").write_text('{"hidden_size": 32}\n', encoding="utf-8")
    broken = root / "broken-tokenizer"
    shutil.copytree(target, broken)
    (broken / "tokenizer.json").write_text('{"version": "1.0", "model": ', encoding="utf-8")
    (root / "bad.yaml").write_text("name: [unclosed\n", encoding="utf-8")
    (root / "misaligned.txt").write_text("one\ntwo\nthree\n", encoding="utf-8")
    pickled = root / "pickled"
    shutil.copytree(model, pickled)
    for shard in pickled.glob("*.safetensors"):
        shard.rename(shard.with_name("pytorch_model.bin"))  # never loaded: the name alone is refused
    return World(model, target, corpora, root / "empty.txt", root / "latin1.txt", root / "small.txt",
                 root / "bad.json", root / "no_type.json", broken, root / "bad.yaml", root / "misaligned.txt", pickled)


def adapt(**extra: str) -> Callable[[World, Path], list[str]]:
    """``vocadapt adapt`` on the tiny world with ``extra`` dotted overrides (values may name world files)."""

    def build(w: World, cwd: Path) -> list[str]:
        values = {key: value.format(w=w, cwd=cwd) for key, value in extra.items()}
        overrides = tiny_config_overrides(w.model, w.corpora, cwd, **(FAST | values))
        return ["adapt", *[arg for override in overrides for arg in ("--set", override)]]

    return build


def config(*args: str, **extra: str) -> Callable[[World, Path], list[str]]:
    """``vocadapt config`` on the tiny world's config, like :func:`adapt`."""

    def build(w: World, cwd: Path) -> list[str]:
        return ["config", *[a.format(w=w, cwd=cwd) for a in args], *adapt(**extra)(w, cwd)[1:]]

    return build


def cli(*args: str) -> Callable[[World, Path], list[str]]:
    """A command line whose ``{w.*}`` and ``{cwd}`` placeholders name the world's files and the case's folder."""
    return lambda w, cwd: [arg.format(w=w, cwd=cwd) for arg in args]


INIT = ("init", "--source-model", "{w.model}", "--target-tokenizer", "{w.target_tokenizer}", "--out", "{cwd}/out")
TRAIN = ("tokenizer", "train", "--kind", "bytelevel-bpe", "--out", "{cwd}/out")


def mlflow_runs(db: Path) -> dict[str, str]:
    """{run name: status} of every run in a SQLite store."""
    import mlflow

    client = mlflow.tracking.MlflowClient(f"sqlite:///{db}")
    experiments = [e.experiment_id for e in client.search_experiments()]
    return {run.info.run_name: run.info.status for run in client.search_runs(experiments)}


def assert_no_mlflow_run(cwd: Path, *, registry: bool = True) -> None:
    """A refused command opened no MLflow run in ``cwd``'s store (``mlflow.db``, if the command created one) and,
    with ``registry``, registered no model."""
    db = cwd / "mlflow.db"
    if not db.exists():
        return
    import mlflow

    client = mlflow.tracking.MlflowClient(f"sqlite:///{db}")
    experiments = [e.experiment_id for e in client.search_experiments()]
    assert not client.search_runs(experiments), "a run was opened"
    if registry:
        assert not client.search_registered_models(), "the registry changed"
