"""Storage URIs end to end against a real S3 endpoint on loopback (moto's server, through pyarrow's S3 filesystem,
configured only by the standard AWS variables): LAPT checkpoints and resume on Ray Train, a sweep's Tune state and
resume, and the sweep's artefact cache, all in a bucket; local paths keep working; credentials never shown.

The S3 server starts before the module's Ray cluster, so every Ray worker inherits ``AWS_ENDPOINT_URL`` and the
keys, as the nodes of a real cluster get them from their environment.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.s3_server import S3_ENV, object_keys, s3_server
from tests.training.lapt_tiny_world import ENGLISH, ITALIAN, make_model, make_tokenizer
from vocadapt.components.errors import UserError
from vocadapt.platform.data.storage import locate

ROOT = Path(__file__).resolve().parents[2]
BUCKET = "vocadapt"

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with s3_server(tmp_path_factory.mktemp("s3"), buckets=(BUCKET,)) as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def ray_cluster(s3):
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    yield
    ray.shutdown()


def test_paths_and_uris_are_located_and_credentials_never_shown(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    local = locate("runs/ray")
    assert local.local == tmp_path / "runs" / "ray" and str(local) == str(tmp_path / "runs" / "ray")
    assert locate(f"file://{tmp_path}/x").local == tmp_path / "x"
    secret = locate("s3://AKIDEXAMPLE:wJalrXUtnFEMI@bucket/prefix/")
    assert secret.local is None and secret.path == "bucket/prefix"
    assert str(secret) == "s3://***@bucket/prefix/" and "wJalr" not in repr(secret / "run")
    assert (secret / "run").uri == "s3://AKIDEXAMPLE:wJalrXUtnFEMI@bucket/prefix/run"  # exact, for passing on
    assert locate("gs://bucket/x").path == "bucket/x"
    with pytest.raises(UserError, match="lapt.storage_path nosuch://b/x: no filesystem for nosuch://"):
        locate("nosuch://b/x", field="lapt.storage_path")


def test_files_round_trip_through_the_bucket_and_bad_buckets_are_named(s3, tmp_path):
    where = locate(f"s3://{BUCKET}/round-trip")
    (where / "a" / "note.json").write_text('{"x": 1}')
    assert (where / "a" / "note.json").is_file() and (where / "a").is_dir() and not (where / "b").exists()
    assert json.loads((where / "a" / "note.json").read_text()) == {"x": 1}
    (tmp_path / "up" / "sub").mkdir(parents=True)
    (tmp_path / "up" / "sub" / "w.bin").write_bytes(b"\x00\x01")
    (where / "tree").upload(tmp_path / "up")
    assert object_keys(s3, BUCKET, "round-trip/") == ["round-trip/a/note.json", "round-trip/tree/sub/w.bin"]
    (where / "tree").download(tmp_path / "down")
    assert (tmp_path / "down" / "sub" / "w.bin").read_bytes() == b"\x00\x01"
    with pytest.raises(UserError, match="bucket 'missing' does not exist"):
        locate("s3://missing/x").check_reachable("lapt.storage_path")
    key, secret = S3_ENV["AWS_ACCESS_KEY_ID"], S3_ENV["AWS_SECRET_ACCESS_KEY"]
    with_keys = locate(f"s3://{key}:{secret}@{BUCKET}/keys")
    with_keys.check_reachable("lapt.storage_path")
    (with_keys / "f").write_text("ok")
    assert (locate(f"s3://{BUCKET}/keys") / "f").read_text() == "ok"


def test_the_artefact_cache_lives_in_the_bucket_and_is_shared(s3, tmp_path):
    from vocadapt.platform.data.storage import local_mirror
    from vocadapt.platform.sweeps.cache import COMPUTED, REUSED, ArtefactCache, cache_key

    root = f"s3://{BUCKET}/sweep/cache"
    built = []

    def build(folder: Path) -> None:
        built.append(1)
        (folder / "value.json").write_text("[1, 2, 3]", encoding="utf-8")

    first = ArtefactCache(root)
    entry = first.entry("probe", {"n": 3}, build)
    assert first.events == {"probe": COMPUTED} and (entry / "value.json").read_text() == "[1, 2, 3]"
    key = cache_key("probe", {"n": 3})
    assert sorted(object_keys(s3, BUCKET, "sweep/cache/")) == [f"sweep/cache/probe/{key}/inputs.json",
                                                                f"sweep/cache/probe/{key}/value.json"]
    # another node: no local copy yet, so the entry comes down from the bucket, not from a rebuild
    import shutil

    shutil.rmtree(local_mirror(locate(root) / "probe" / key))
    second = ArtefactCache(root)
    again = second.entry("probe", {"n": 3}, build)
    assert second.events == {"probe": REUSED} and len(built) == 1
    assert (again / "value.json").read_text() == "[1, 2, 3]"


def _world(root: Path) -> Path:
    tokenizer = make_tokenizer()
    make_model(len(tokenizer)).save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    (root / "it.txt").write_text("\n".join(ITALIAN * 4), encoding="utf-8")
    (root / "en.txt").write_text("\n".join(ENGLISH * 4), encoding="utf-8")
    return root


def test_lapt_checkpoints_to_s3_and_a_rerun_resumes_from_the_bucket(s3, ray_cluster, tmp_path, monkeypatch):
    from vocadapt.platform.lapt import ray_train
    from vocadapt.platform.lapt.ray_train import LaptInputs, LaptPlacement, run_lapt_on_ray

    world = _world(tmp_path)
    settings = dict(max_steps=4, batch_size=2, sequence_length=16, learning_rate=1e-2, warmup_steps=1,
                    num_workers=1, checkpoint_every=2, log_every=1, eval_every=4)
    inputs = LaptInputs([world / "it.txt"], [world / "en.txt"], eval_documents={"target": ITALIAN[:2]})

    def placement(output_dir: Path, storage_path: str = f"s3://{BUCKET}/lapt") -> LaptPlacement:
        return LaptPlacement(output_dir, "on-s3", storage_path=storage_path)

    result = run_lapt_on_ray(world / "model", world / "model", settings, inputs, placement=placement(world / "out"))
    assert [step for step, _ in result.series("loss")] == [1, 2, 3, 4]
    assert (result.model_dir / "model.safetensors").is_file()
    keys = object_keys(s3, BUCKET, "lapt/on-s3/")
    assert "lapt/on-s3/vocadapt_lapt_run.json" in keys
    assert any("/final/model/model.safetensors" in key for key in keys), keys
    assert any("/step-000004/" in key for key in keys), keys  # the loop's checkpoints went to the bucket too
    assert not (Path.cwd() / "s3:").exists() and not (world / "s3:").exists()  # never a local 's3:' folder

    # a rerun under the name on another machine (nothing local): the finished run is found in the bucket, and its
    # model is taken from there without a worker group (Ray's checkpoint record names the final checkpoint)
    def no_workers(*args):
        raise AssertionError("a worker group was started for a finished run")

    with monkeypatch.context() as patched:
        patched.setattr(ray_train, "_fit", no_workers)
        again = run_lapt_on_ray(world / "model", world / "model", settings, inputs,
                                placement=placement(world / "elsewhere"))
    assert again.steps == 4 and again.series("loss") == result.series("loss")
    assert (world / "elsewhere" / "model" / "model.safetensors").read_bytes() == \
        (result.model_dir / "model.safetensors").read_bytes()

    key, secret = S3_ENV["AWS_ACCESS_KEY_ID"], S3_ENV["AWS_SECRET_ACCESS_KEY"]
    other = placement(world / "changed", storage_path=f"s3://{key}:{secret}@{BUCKET}/lapt")
    with pytest.raises(UserError, match=r"already exists in s3://\*\*\*@vocadapt/lapt") as refused:
        run_lapt_on_ray(world / "model", world / "model", {**settings, "learning_rate": 5e-2}, inputs, placement=other)
    assert secret not in str(refused.value)


def _recording_objective(cache_probe: list[str]):
    """The tiny sweep objective plus one artefact-cache entry per trial, read through the trial's cache URI. A
    closure, so Ray's cloudpickle sends it by value."""

    def objective(config, trial):
        from tests.sweeps.tiny_objective import tiny_objective
        from vocadapt.platform.sweeps.cache import ArtefactCache

        assert trial.cache_dir.startswith("s3://"), trial.cache_dir
        entry = ArtefactCache(trial.cache_dir).entry(
            "probe", {"seed": config.seed}, lambda folder: (folder / "x.txt").write_text("x", encoding="utf-8"))
        assert (entry / "x.txt").read_text(encoding="utf-8") == "x"
        return tiny_objective(config, trial)

    return objective


def test_a_sweep_keeps_its_state_and_cache_in_s3_and_resumes(s3, ray_cluster, tmp_path, monkeypatch):
    from vocadapt.components.errors import UserError
    from vocadapt.pipelines.sweep import run_sweep
    from vocadapt.platform.sweeps.tune import SweepConfig

    monkeypatch.chdir(tmp_path)
    base = {
        "name": "tiny", "target": {"language": "it"}, "corpus": {"train": ["it.txt"], "validation": ["it-val.txt"]},
        "lapt": {"max_steps": 2, "learning_rate": 2.0}, "output_dir": str(tmp_path / "runs"),
        "tracking": {"experiment": "sweep-s3", "tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}"},
    }
    sweep = SweepConfig.model_validate({
        "name": "s3-sweep", "base": base, "search_space": {"init.methods": {"grid": ["fvt", "random"]}},
        "scheduler": {"kind": "fifo", "max_t": 2}, "budget": {"max_concurrent_trials": 1, "cpus_per_trial": 1},
        "storage_path": f"s3://{BUCKET}/sweeps", "register_best": False,
    })
    result = run_sweep(sweep, objective=_recording_objective([]))
    assert sorted(r["status"] for r in result.rows) == ["FINISHED", "FINISHED"]
    keys = object_keys(s3, BUCKET, "sweeps/s3-sweep/")
    assert "sweeps/s3-sweep/vocadapt-sweep.json" in keys
    assert any(key.startswith("sweeps/s3-sweep/cache/probe/") for key in keys)
    assert any("experiment_state" in key for key in keys), keys  # Tune's own state, what --resume reads
    assert all(Path(r["model_dir"]).is_relative_to(tmp_path / "runs" / "s3-sweep" / "trials") for r in result.rows)
    assert not (tmp_path / "s3:").exists()

    with pytest.raises(UserError, match=r"already has state in s3://vocadapt/sweeps/s3-sweep; pass --resume"):
        run_sweep(sweep, objective=_recording_objective([]))
    resumed = run_sweep(sweep, objective=_recording_objective([]), resume=True)
    assert resumed.parent_run_id == result.parent_run_id
    assert sorted(r["status"] for r in resumed.rows) == ["FINISHED", "FINISHED"]


def test_vocadapt_lapt_takes_an_s3_storage_path_and_refuses_a_missing_bucket_up_front(s3, ray_cluster, tmp_path,
                                                                                     fixture_corpora, monkeypatch):
    from mlflow.tracking import MlflowClient
    from typer.testing import CliRunner

    from tests.pipelines.tiny_world import build_source_model, tiny_config_overrides
    from vocadapt.cli.app import app

    corpora = {key: Path(path) for key, path in fixture_corpora.items()}
    model = build_source_model(tmp_path / "model", [corpora["en.train"]])
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)

    def lapt(storage: str):
        overrides = tiny_config_overrides(model, corpora, tmp_path, **{
            "lapt.max_steps": "2", "lapt.batch_size": "2", "lapt.sequence_length": "16", "lapt.num_workers": "1",
            "lapt.runner": "ray",
            "lapt.eval_every": "2", "lapt.checkpoint_every": "1", "tracking.energy": "false",
            "evaluation.max_documents": "2", "lapt.storage_path": storage})
        return CliRunner().invoke(app, ["lapt", "--model", str(model), *(a for o in overrides for a in ("--set", o))])

    refused = lapt("s3://no-such-bucket/x")
    assert refused.exit_code == 2 and "bucket 'no-such-bucket' does not exist" in refused.output, refused.output
    assert "Traceback" not in refused.output
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("tiny-e2e")
    assert experiment is None or not client.search_runs([experiment.experiment_id])  # refused before any run

    done = lapt(f"s3://{BUCKET}/cli")
    assert done.exit_code == 0, done.output
    keys = object_keys(s3, BUCKET, "cli/")
    assert any(key.endswith("vocadapt_lapt_run.json") for key in keys)
    assert any("/final/model/model.safetensors" in key for key in keys), keys
    assert not (tmp_path / "s3:").exists()
