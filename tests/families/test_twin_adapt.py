"""`vocadapt adapt` on twins of every family, resolved by their real hub ids as a user with the hub runs it.

A reduced-width twin of each family (Llama-3.1's 256 added specials at 128000.., Mistral-7B-v0.1's SentencePiece
``tokenizer.model``, Llama-2, Qwen3's padded rows, Gemma-3's tied head and 6,415 added tokens, DeepSeek-V3's
mixture of experts) sits in a huggingface_hub cache under its hub id (``meta-llama/Llama-3.1-8B``, ...); the command
runs in its own process with ``HF_HUB_OFFLINE=1`` and ``HF_HUB_CACHE`` there, expands the vocabulary by a few
hundred Italian tokens, and then replaces it with an Italian tokenizer trained like the family's; each run takes two
LAPT steps (in its process, as ``tiny_config_overrides`` sets), evaluates, and registers the best model on a real
MLflow server. The registered version must say it is a twin, pass the serve check (vLLM included where the serving
environment exists); the expanded checkpoint must keep every special token's id and row, the replaced one every
special token's text, role and row, and both name their tokenizer's ids in their config."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from tests.families.test_twins import reduced_twin  # noqa: F401  (the session fixture, shared with test_twins.py)
from tests.mlflow_server import mlflow_server
from tests.pipelines.tiny_world import tiny_config_overrides

pytestmark = pytest.mark.timeout(1800)  # twelve adapts in one process

FAMILIES = ("llama3_1", "mistral_v1", "llama2", "qwen3", "gemma3", "deepseek_v3")
# A target tokenizer trained like Gemma-3 carries its 6,415 added tokens: it needs a larger vocabulary
VOCAB_SIZES = {"gemma3": 8192}
NEW_TOKENS = 300
# each family expanded (the key is its name), then replaced by an Italian tokenizer trained like its own
RUNS = FAMILIES + tuple(f"{name}-replace" for name in FAMILIES)
# The twelve adaptations run in one process, one after the other, through the command line's own entry point (Typer's
# runner): a user's shell runs them as twelve processes; one process starts Python and transformers once.
DRIVER = """
import json, sys
from typer.testing import CliRunner
from vocadapt.cli.app import app

for name, arguments in json.loads(sys.argv[1]).items():
    result = CliRunner().invoke(app, arguments)
    print(f"=== {name} exit {result.exit_code}\\n{result.output}", flush=True)
    if result.exit_code != 0:
        if result.exception is not None and result.exit_code == 1:
            import traceback
            traceback.print_exception(result.exception)
        sys.exit(result.exit_code)
"""


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory, reduced_twin) -> dict[str, Path]:  # noqa: F811
    """A hub cache (``<root>/hub``) holding the two twins under their real hub ids; returns {family: twin folder}."""
    from vocadapt.platform.families.catalogue import model_family
    from vocadapt.platform.families.twins import install_twin_in_hub_cache

    root = tmp_path_factory.mktemp("twin-hub")
    for name in FAMILIES:
        install_twin_in_hub_cache(reduced_twin(name), model_family(name).hub_id, root / "hub")
    return {name: reduced_twin(name) for name in FAMILIES} | {"cache": root / "hub"}


@pytest.fixture(scope="module")
def adapted(tmp_path_factory, hub_cache, fixture_corpora):
    """Both adaptations, tracked by one MLflow server, with ``HF_HUB_OFFLINE=1`` and ``HF_HUB_CACHE`` set as a user
    sets them: yields (url, {family: (the --json report, the console output)}) while the server is up."""
    from vocadapt.platform.families.catalogue import model_family

    workdir = tmp_path_factory.mktemp("twin-adapt")
    corpora = {key: Path(path) for key, path in fixture_corpora.items()}
    runs = {}
    for key in RUNS:  # every expansion, then every replacement: the replaced model is version 2 of the same name
        name, mode = key.removesuffix("-replace"), "replace" if key.endswith("-replace") else "expand"
        overrides = tiny_config_overrides(Path("unused"), corpora, workdir, **{
            "name": f"twin-{key}", "source.model": model_family(name).hub_id, "init.mode": mode,
            "init.methods": "[fvt]", "tokenizer.vocab_size": str(VOCAB_SIZES.get(name, 2000)),
            "tokenizer.protect_lexicon": "null", "tracking.experiment": "twin-e2e", "tracking.energy": "false",
            # four held-out paragraphs a language for bits per byte and fertility (every stage still runs; the
            # side-by-side items come from the whole validation file)
            "evaluation.max_documents": "4", "evaluation.side_by_side_items": "2",
        } | ({"tokenizer.expand_top_k": str(NEW_TOKENS)} if mode == "expand" else {}))
        runs[key] = ["adapt", *[arg for override in overrides for arg in ("--set", override)],
                     "--json", str(workdir / f"{key}.json")]
    with mlflow_server(workdir) as url:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(hub_cache["cache"]),
               "MLFLOW_TRACKING_URI": url}
        env.pop("HF_HOME", None)
        done = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(runs)], cwd=workdir, env=env,
                              capture_output=True, text=True, timeout=1700)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        outputs = dict(part.split("\n", 1) for part in done.stdout.split("=== ")[1:])
        yield url, {key: (json.loads((workdir / f"{key}.json").read_text()), outputs[f"{key} exit 0"])
                    for key in RUNS}


@pytest.mark.parametrize("name", FAMILIES)
def test_adapt_resolves_the_hub_id_through_the_cache(adapted, hub_cache, name):
    """The run read the twin from the hub cache's snapshot (not a folder the test named) and expanded it."""
    from vocadapt.platform.families.catalogue import model_family

    _, results = adapted
    report, output = results[name]
    assert report["best_method"] == "fvt"
    assert f"registered vocadapt-it-{model_family(name).hub_id.split('/')[1].lower()} version 1" in output
    checkpoint = _checkpoint(report)
    config = json.loads((checkpoint / "config.json").read_text())
    tokenizer_size = len(_tokenizer(checkpoint))
    assert tokenizer_size >= model_family(name).tokenizer_size + NEW_TOKENS // 2
    # every id has a row; a padded family (Qwen3, DeepSeek-V3) gives its padding rows to new tokens first
    assert config["vocab_size"] >= max(tokenizer_size, model_family(name).vocab_rows)
    assert config["vocadapt_twin"]["family"] == name  # the marker survives initialisation and LAPT
    assert config["vocadapt_twin"]["note"] == "random weights, not the real model"


@pytest.mark.parametrize("name", FAMILIES)
def test_specials_keep_their_ids_rows_and_config_ids(adapted, hub_cache, name):
    """Every added token of the source (Llama-3.1's 256 specials at 128000.., Mistral's <unk> <s> </s>) keeps its
    id and text; its row is still nearest to its own source row (two LAPT steps move rows a little); the config's
    bos/eos/pad ids are the adapted tokenizer's and the source's; new tokens take ids after every id in use."""
    import torch
    from vocadapt.platform.families.catalogue import model_family

    _, results = adapted
    checkpoint = _checkpoint(results[name][0])
    source, target = _tokenizer(hub_cache[name]), _tokenizer(checkpoint)
    source_config = json.loads((hub_cache[name] / "config.json").read_text())
    config = json.loads((checkpoint / "config.json").read_text())
    for field in ("bos_token_id", "eos_token_id", "pad_token_id"):
        assert config.get(field) == getattr(target, field) == source_config.get(field), field
    specials = {token: token_id for token, token_id in source.get_added_vocab().items()}
    assert specials and len(target) > len(source)
    moved = {token: (token_id, target.convert_tokens_to_ids(token)) for token, token_id in specials.items()
             if target.convert_tokens_to_ids(token) != token_id}
    assert not moved, f"{len(moved)} added tokens moved (token: (source id, adapted id)): {list(moved.items())[:3]}"
    new_ids = sorted(set(target.get_vocab().values()) - set(source.get_vocab().values()))
    assert new_ids and new_ids[0] > max(source.get_vocab().values())

    tensors = ["model.embed_tokens.weight"] + ([] if model_family(name).tied else ["lm_head.weight"])
    for tensor in tensors:
        before, after = _matrix(hub_cache[name], tensor), _matrix(checkpoint, tensor)
        ids = torch.tensor(sorted(specials.values()))
        # in slices: Gemma-3's 6,415 added rows against its 262,144 source rows are 6.7 GB of distances at once
        nearest = torch.cat([torch.cdist(after[part], before).argmin(dim=1) for part in ids.split(512)])
        assert torch.equal(nearest, ids), tensor


@pytest.mark.parametrize("name", FAMILIES)
def test_replace_gives_each_special_its_role_and_source_row(adapted, hub_cache, name):
    """`adapt` with init.mode replace on the twin resolved by its hub id: a smaller vocabulary trained like the
    family's, registered as version 2 of the same name; every special token of the source is in it with its text
    and role (the config's bos/eos/pad ids are the adapted tokenizer's), and its rows are still nearest to its own
    source rows after two LAPT steps."""
    import torch
    from vocadapt.platform.families.catalogue import model_family

    _, results = adapted
    report, output = results[f"{name}-replace"]
    assert report["best_method"] == "fvt"
    assert f"registered vocadapt-it-{model_family(name).hub_id.split('/')[1].lower()} version 2" in output
    checkpoint = _checkpoint(report)
    source, target = _tokenizer(hub_cache[name]), _tokenizer(checkpoint)
    config = json.loads((checkpoint / "config.json").read_text())
    assert len(target) < len(source) and config["vocab_size"] >= len(target)
    assert config["vocadapt_twin"]["family"] == name
    for role in ("bos", "eos", "pad"):
        assert config.get(f"{role}_token_id") == getattr(target, f"{role}_token_id"), role
        assert getattr(target, f"{role}_token") == getattr(source, f"{role}_token"), role
    specials = sorted(set(source.all_special_tokens))
    assert specials and all(token in target.get_vocab() for token in specials)

    source_ids = torch.tensor(source.convert_tokens_to_ids(specials))
    target_ids = torch.tensor(target.convert_tokens_to_ids(specials))
    for tensor in ["model.embed_tokens.weight"] + ([] if model_family(name).tied else ["lm_head.weight"]):
        before, after = _matrix(hub_cache[name], tensor), _matrix(checkpoint, tensor)
        nearest = torch.cdist(after[target_ids], before).argmin(dim=1)
        assert torch.equal(nearest, source_ids), tensor


@pytest.mark.parametrize("key", RUNS)
def test_registered_version_says_twin(adapted, key, tmp_path):
    """The version's tags, description and model card name the twin; no tag names the real model alone."""
    import mlflow

    url, results = adapted
    report, _ = results[key]
    registered_name, version = report["registered"]
    client = mlflow.tracking.MlflowClient(url, registry_uri=url)
    model_version = client.get_model_version(registered_name, str(version))
    tags = model_version.tags
    assert "twin" in tags["vocadapt.twin"] and "random weights, not the real model" in tags["vocadapt.twin"]
    assert "twin" in model_version.description
    assert tags["vocadapt.source_model"].endswith("(twin: random weights, not the real model)")
    card = Path(client.download_artifacts(model_version.run_id, "model_card.md", str(tmp_path))).read_text()
    assert "Twin, not a real model" in card and "random weights, not the real model" in card
    assert tags["vocadapt.serve_check"]  # the serve check ran before registration


def test_twin_passes_the_vllm_serve_check(adapted, tmp_path):
    """The serve check's vLLM half on each adapted twin (CI builds the serving environment; here it may not exist:
    the check then reports its half as skipped with that wording, and this test skips, which CI's
    VOCADAPT_REQUIRE_VLLM=1 turns into a failure)."""
    import mlflow

    url, results = adapted
    client = mlflow.tracking.MlflowClient(url, registry_uri=url)
    for key in RUNS:
        registered_name, version = results[key][0]["registered"]
        run_id = client.get_model_version(registered_name, str(version)).run_id
        report = json.loads(Path(client.download_artifacts(run_id, "serve_check.json", str(tmp_path))).read_text())
        vllm = [finding for finding in report["findings"] if finding["check"] == "decode (vLLM)"]
        if vllm and vllm[0]["status"] == "skipped" and "no vLLM serving environment" in vllm[0]["detail"]:
            pytest.skip(f"the serve check's vLLM half did not run: {vllm[0]['detail']}")
        assert vllm and vllm[0]["status"] == "pass", (key, vllm)


@lru_cache(maxsize=None)
def _tokenizer(folder: Path):
    """A folder's tokenizer, loaded once for the module's tests (Gemma-3's 262,144 ids take seconds to load)."""
    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

    return load_pretrained_tokenizer(str(folder))


def _matrix(folder: Path, tensor: str):
    """One tensor of the folder's safetensors file, as float32."""
    from safetensors import safe_open

    with safe_open(str(next(folder.glob("*.safetensors"))), framework="pt") as handle:
        return handle.get_tensor(tensor).float()


def _checkpoint(report: dict) -> Path:
    """The registered checkpoint in the run's output (the folder the registry wrote its manifest into)."""
    folders = [path.parent for path in Path(report["output_dir"]).rglob("vocadapt-manifest.json")]
    assert len(folders) == 1, folders
    return folders[0]
