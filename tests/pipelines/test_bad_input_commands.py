"""Every command refuses bad input the same way: exit code 2, one message naming the input (file, field or flag)
and the fix, no traceback, and nothing left behind (no new file or folder, no MLflow run, no registry entry).

One parametrised test over a table of cases (``CASES``), each a command line built on the tiny world of
``bad_input_world.py``. Refusals happen before any work, so the whole table runs in seconds. ``bad_input_table.py``
prints the table (input, exit code, message) that README's "What vocadapt guarantees on bad input" shows. Good
input passes the same checks (every shipped config, and the tiny world's files). Ctrl-C and internal errors:
``test_bad_input_interrupts.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from typer.testing import CliRunner

from tests.pipelines.bad_input_record import record_case
from tests.pipelines.bad_input_world import (INIT, TRAIN, World, adapt, assert_no_mlflow_run, cli, config,  # noqa: F401
                                             world)  # world: the fixture
from vocadapt.cli.app import app

pytestmark = pytest.mark.timeout(600)
REPOSITORY = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Case:
    id: str
    args: Callable[[World, Path], list[str]]
    named: tuple[str, ...]  # what the message must contain (placeholders as in ``cli``)
    setup: Callable[[World, Path], None] | None = None


def _existing_output(w: World, cwd: Path) -> None:
    (cwd / "runs" / "tiny" / "it").mkdir(parents=True)


def _existing_out(w: World, cwd: Path) -> None:
    (cwd / "out").mkdir()
    (cwd / "out" / "keep.txt").write_text("mine")


def _tokenizer_past_the_rows(w: World, cwd: Path) -> None:
    """``cwd/grown``: the tiny model whose tokenizer got 20 added tokens without resizing the embedding."""
    import shutil

    from transformers import AutoTokenizer

    shutil.copytree(w.model, cwd / "grown")
    tokenizer = AutoTokenizer.from_pretrained(str(cwd / "grown"))
    tokenizer.add_tokens([f"<extra_{index}>" for index in range(20)])
    tokenizer.save_pretrained(str(cwd / "grown"))


def _truncated_model(w: World, cwd: Path) -> None:
    """``cwd/truncated``: the tiny model whose safetensors file lost its last 100 bytes (a copy cut short)."""
    import shutil

    shutil.copytree(w.model, cwd / "truncated")
    shard = cwd / "truncated" / "model.safetensors"
    shard.write_bytes(shard.read_bytes()[:-100])


def _two_tokens_on_one_id(w: World, cwd: Path) -> None:
    """``cwd/dup-ids``: the tiny model whose tokenizer.json gives two tokens the same id."""
    import json
    import shutil

    shutil.copytree(w.model, cwd / "dup-ids")
    path = cwd / "dup-ids" / "tokenizer.json"
    tree = json.loads(path.read_text(encoding="utf-8"))
    vocab = tree["model"]["vocab"]
    first, second = sorted(vocab, key=vocab.get)[100:102]
    vocab[second] = vocab[first]
    path.write_text(json.dumps(tree), encoding="utf-8")


def _hub_cache(w: World, cwd: Path) -> None:
    (cwd / "hub").mkdir()


def _corpus_inside_out(w: World, cwd: Path) -> None:
    (cwd / "out").mkdir()
    (cwd / "out" / "corpus.txt").write_text(w.small.read_text(encoding="utf-8"), encoding="utf-8")


def _config_with_a_key_twice(w: World, cwd: Path) -> None:
    (cwd / "twice.yaml").write_text("target:\n  language: it\nname: first\nname: second\n", encoding="utf-8")


def _empty_gates(w: World, cwd: Path) -> None:
    (cwd / "gates.yaml").write_text("# the defaults, please\n", encoding="utf-8")


EXPAND = ("tokenizer", "expand", "--source", "{w.model}", "--target", "{w.target_tokenizer}", "--out", "{cwd}/out")


def lapt(*args: str) -> Callable[[World, Path], list[str]]:
    """``vocadapt lapt`` on the tiny world's config (its corpora, not the embedded default's) and ``args``."""
    return lambda w, cwd: ["lapt", *adapt()(w, cwd)[1:], *[arg.format(w=w, cwd=cwd) for arg in args]]


TRIM = ("trim", "{w.model}", "--corpus", "{w.corpora[it.train]}", "--out", "{cwd}/out")
EVALUATE = ("evaluate", "--no-energy", "--work-dir", "{cwd}/out")
NO_STORE = ("--tracking-uri", "sqlite:///{cwd}/mlflow.db")

CASES = [
    # adapt: config checks (before any file is read) and file checks (before any run or folder exists)
    Case("adapt unknown method", adapt(**{"init.methods": "[fvt, magic]"}), ("init.methods", "magic", "fvt")),
    Case("adapt unknown method option", adapt(**{"init.options": "{{fvt: {{speed: 3}}}}"}),
         ("init.options.fvt", "it accepts none")),
    Case("adapt method needs a helper", adapt(**{"init.methods": "[sava]"}), ("init.helper", "sava", "fasttext")),
    Case("adapt helper folder missing", adapt(**{"init.methods": "[sava]", "init.helper": "model:{cwd}/no-helper"}),
         ("init.helper", "no-helper", "does not exist", "give 'fasttext'")),
    Case("adapt misspelt field", adapt(**{"lapt.max_step": "5"}), ("lapt.max_step", "max_steps")),
    Case("adapt merge without an expansion", adapt(**{"init.mode": "replace", "merge.method": "elchat-slerp"}),
         ("merge.method", "init.mode expand")),
    Case("adapt value out of range", adapt(**{"tokenizer.vocab_size": "10"}),
         ("tokenizer.vocab_size", "greater than or equal to 256")),
    Case("adapt LAPT in process on several workers", adapt(**{"lapt.runner": "in_process", "lapt.num_workers": "2"}),
         ("lapt.runner 'in_process'", "lapt.num_workers is 2", "use lapt.runner 'ray'")),
    Case("adapt LAPT on more GPUs than the local cluster has",
         adapt(**{"lapt.enabled": "true", "lapt.runner": "ray", "lapt.use_gpu": "true", "lapt.num_workers": "2"}),
         ("GPU: 2 needed", "local Ray cluster", "Ray would wait for ever", "lapt.use_gpu false", "lapt.num_workers",
          "RAY_ADDRESS")),
    Case("adapt storage URI scheme", adapt(**{"lapt.runner": "ray", "lapt.storage_path": "ftp2://host/ckpt"}),
         ("lapt.storage_path", "ftp2", "s3://")),
    Case("adapt storage URI without bucket", adapt(**{"lapt.runner": "ray", "lapt.storage_path": "s3:///ckpt"}),
         ("lapt.storage_path", "bucket", "s3://BUCKET/PREFIX")),
    Case("adapt tracking URI", adapt(**{"tracking.tracking_uri": "sqlite://mlflow.db"}),
         ("tracking.tracking_uri", "sqlite:///")),
    Case("adapt scoring on a GPU that is not there", adapt(**{"evaluation.device": "cuda"}),
         ("evaluation.device", "no CUDA device", "auto")),
    Case("adapt unknown energy grid", adapt(**{"tracking.energy": "true", "tracking.country_iso_code": "XYZ"}),
         ("XYZ", "tracking.country_iso_code", "ISO 3166-1 alpha-3")),
    Case("adapt missing corpus file", adapt(**{"corpus.train": "[{cwd}/nope.txt]"}),
         ("corpus.train", "nope.txt", "fix the path or run `vocadapt assets`")),
    Case("adapt empty corpus", adapt(**{"corpus.train": "[{w.empty}]"}),
         ("{w.empty}", "empty", "one document per line")),
    Case("adapt corpus not UTF-8", adapt(**{"corpus.train": "[{w.latin1}]"}),
         ("{w.latin1}", "line 3", "UTF-8", "iconv -t UTF-8")),
    Case("adapt corpus in another language", adapt(**{"corpus.train": "[{w.corpora[en.train]}]"}),
         ("{w.corpora[en.train]}", "target.language")),
    Case("adapt missing source model", adapt(**{"source.model": "{cwd}/no-model"}),
         ("source.model", "no-model", "give a saved model directory")),
    Case("adapt missing pretrained tokenizer", adapt(**{"tokenizer.pretrained": "{cwd}/no-tok"}),
         ("tokenizer.pretrained", "no-tok", "or null to train one")),
    Case("adapt existing output folder", adapt(), ("name", "already exists", "--overwrite"), _existing_output),
    Case("adapt tokenizer larger than the embedding", adapt(**{"source.model": "{cwd}/grown"}),
         ("source.model", "grown", "embedding rows", "resize_token_embeddings"), _tokenizer_past_the_rows),
    Case("adapt out-of-domain text seen in training",
         adapt(**{"evaluation.out_of_domain": "true", "evaluation.out_of_domain_text":
                  "{{it: [{w.corpora[it.train]}], en: [{w.corpora[en.validation]}]}}"}),
         ("out-of-domain text overlaps the training text", "equals", "evaluation.out_of_domain_text")),
    Case("adapt target language without out-of-domain text",
         adapt(**{"target.language": "null", "target.languages": "[it, hi]", "evaluation.out_of_domain": "true",
                  "corpus.languages.hi.train": "[{w.corpora[hi.train]}]", "tracking.register_best": "true",
                  "corpus.languages.hi.validation": "[{w.corpora[hi.validation]}]"}),
         ("no out-of-domain text for target language(s) hi", "evaluation.out_of_domain_text: {{hi:")),
    Case("adapt config file missing", cli("adapt", "{cwd}/missing.yaml"),
         ("missing.yaml", "does not exist", "pass a YAML file such as configs/italian-smollm2.yaml")),
    Case("adapt config file not YAML", cli("adapt", "{w.bad_yaml}"),
         ("{w.bad_yaml}", "not valid YAML", "line 1, column 7")),
    # config: the same checks as adapt, files with --check-files
    Case("config unknown method", config(**{"init.methods": "[fvt, magic]"}),
         ("init.methods", "magic", "choose one of align,")),
    Case("config storage URI", config(**{"lapt.runner": "ray", "lapt.storage_path": "nope://x/y"}),
         ("lapt.storage_path", "nope", "use a local folder or one of file://")),
    Case("config --check-files corpus not UTF-8", config("--check-files", **{"corpus.train": "[{w.latin1}]"}),
         ("{w.latin1}", "line 3", "UTF-8", "iconv -t UTF-8")),
    Case("config --check-files existing output", config("--check-files"), ("name", "--overwrite"),
         _existing_output),
    Case("config --check-files missing source model", config("--check-files", **{"source.model": "{cwd}/gone"}),
         ("source.model", "gone", "give a saved model directory")),
    Case("config without target language", cli("config"), ("target: Field required",)),
    # init
    Case("init unknown method", cli(*INIT, "--method", "magic"), ("--method", "magic", "choose one of align,")),
    Case("init bad mode", cli(*INIT, "--method", "fvt", "--mode", "sideways"),
         ("--mode", "sideways", "'replace' or 'expand'")),
    Case("init option without value", cli(*INIT, "--method", "fvt", "--option", "temperature"),
         ("--option", "--option temperature=0.1")),
    Case("init missing target tokenizer", cli("init", "--source-model", "{w.model}", "--target-tokenizer",
                                              "{cwd}/no-tok", "--method", "fvt", "--out", "{cwd}/out"),
         ("--target-tokenizer", "no-tok", "give an existing path")),
    Case("init existing --out", cli(*INIT, "--method", "fvt"), ("--out", "--overwrite"), _existing_out),
    Case("init tokenizer larger than the embedding", cli("init", "--source-model", "{cwd}/grown", "--target-tokenizer",

                                                                 "{w.target_tokenizer}", "--out", "{cwd}/out", "--method", "fvt"),
         ("embedding rows", "resize_token_embeddings"), _tokenizer_past_the_rows),
    # lapt
    Case("lapt missing model", lapt("--model", "{cwd}/no-model"),
         ("no-model", "pass --model with a saved model folder")),
    Case("lapt no budget", lapt("--set", "lapt.max_steps=0", "--model", "{w.model}"),
         ("lapt.max_steps", "lapt.max_tokens", "positive number")),
    Case("lapt on more GPUs than the local cluster has",
         lapt("--set", "lapt.runner=ray", "--set", "lapt.use_gpu=true", "--set", "lapt.num_workers=2", "--model",
              "{w.model}"),
         ("GPU: 2 needed", "lapt.use_gpu false", "RAY_ADDRESS")),
    Case("lapt pickled model", lapt("--model", "{w.pickled}"), ("{w.pickled}", "safetensors", "convert")),
    Case("lapt --output is the model", lapt("--model", "{w.model}", "--output", "{w.model}"),
         ("--output {w.model} is the input --model", "nothing was written")),
    # evaluate
    Case("evaluate missing model", cli(*EVALUATE, "--model", "{cwd}/no-model"),
         ("--model", "no-model", "save_pretrained", "models:/<name>@<alias>")),
    Case("evaluate unknown suite", cli(*EVALUATE, "--model", "{w.model}", "--suite", "nosuch"),
         ("suite", "nosuch", "use one of cluster-it, offline, offline-vllm")),
    Case("evaluate --data without file", cli(*EVALUATE, "--model", "{w.model}", "--data", "it"),
         ("--data", "LANG=FILE")),
    Case("evaluate --set without value", cli(*EVALUATE, "--model", "{w.model}", "--set", "cloze"),
         ("--set", "dotted.key=value")),
    # sweep
    Case("sweep without config", cli("sweep"), ("pass --config configs/sweeps/italian-smollm2.yaml",)),
    Case("sweep config missing", cli("sweep", "--config", "{cwd}/sweep.yaml"), ("sweep.yaml", "pass a YAML file")),
    # languages
    Case("languages with English", cli("languages", "--lang", "en", "--output", "{cwd}/out"),
         ("--lang", "en", "leave it out of --lang")),
    Case("languages not built", cli("languages", "--lang", "zz", "--output", "{cwd}/out"),
         ("vocadapt assets --lang zz",)),
    # tokenizer train / expand / overlap
    Case("tokenizer train empty corpus", cli(*TRAIN, "--vocab-size", "400", "--corpus", "{w.empty}"),
         ("{w.empty}", "no non-empty line", "give UTF-8 text files")),
    Case("tokenizer train corpus not UTF-8", cli(*TRAIN, "--vocab-size", "400", "--corpus", "{w.latin1}"),
         ("{w.latin1}", "line 3", "UTF-8", "iconv")),
    Case("tokenizer train vocabulary out of reach", cli(*TRAIN, "--vocab-size", "5000", "--corpus", "{w.small}"),
         ("--vocab-size 5000", "{w.small}", "gives only", "--min-frequency")),
    Case("tokenizer train missing corpus", cli(*TRAIN, "--vocab-size", "400", "--corpus", "{cwd}/gone.txt"),
         ("--corpus ./gone.txt".replace("./", "{cwd}/"), "no such file", "pass existing UTF-8 text files")),
    Case("tokenizer train unknown kind", cli("tokenizer", "train", "--kind", "magic", "--vocab-size", "400",
                                             "--corpus", "{w.small}", "--out", "{cwd}/out"),
         ("--kind", "magic", "choose one of bytelevel-bpe")),
    Case("tokenizer train corpus and dataset", cli(*TRAIN, "--vocab-size", "400", "--corpus", "{w.small}",
                                                   "--dataset", "{w.small}"),
         ("--corpus", "--dataset", "exactly one of them")),
    Case("tokenizer train existing --out", cli(*TRAIN, "--vocab-size", "300", "--corpus", "{w.small}"),
         ("--out {cwd}/out", "not empty", "--overwrite"), _existing_out),
    Case("tokenizer expand --top-k without corpus", cli(*EXPAND, "--top-k", "5"),
         ("--top-k", "--corpus", "target-language text")),
    Case("tokenizer expand missing source", cli("tokenizer", "expand", "--source", "{cwd}/gone", "--target",
                                                "{w.target_tokenizer}", "--out", "{cwd}/out"),
         ("gone", "pass a tokenizer folder")),
    Case("tokenizer overlap broken tokenizer.json", cli("tokenizer", "overlap", "--source", "{w.model}",
                                                        "--target", "{w.broken_tokenizer}"),
         ("{w.broken_tokenizer}/tokenizer.json", "line 1", "save_pretrained")),
    # fertility
    Case("fertility corpus not UTF-8", cli("fertility", "--tokenizer", "{w.model}", "--corpus", "{w.latin1}"),
         ("{w.latin1}", "line 3", "UTF-8")),
    Case("fertility misaligned reference", cli("fertility", "--tokenizer", "{w.model}", "--corpus",
                                               "{w.corpora[it.validation]}", "--reference", "{w.misaligned}"),
         ("--reference", "pass line-aligned translations")),
    Case("fertility missing reference", cli("fertility", "--tokenizer", "{w.model}", "--corpus", "{w.small}",
                                            "--reference", "{cwd}/gone.txt"),
         ("--reference {cwd}/gone.txt", "pass existing UTF-8 text files")),
    Case("fertility missing tokenizer", cli("fertility", "--tokenizer", "{cwd}/gone", "--corpus", "{w.small}"),
         ("gone", "pass a tokenizer folder")),
    # params
    Case("params config not JSON", cli("params", "--config", "{w.bad_json}", "--vocab-size", "100"),
         ("--config", "{w.bad_json}", "line 2", "pass a model's config.json")),
    Case("params config without model_type", cli("params", "--config", "{w.no_model_type}", "--vocab-size", "100"),
         ("{w.no_model_type}", "model_type", "add one")),
    Case("params vocabulary size zero", cli("params", "--config", "{w.model}", "--vocab-size", "0"),
         ("--vocab-size must be positive",)),
    # registry: promote, rollback, serve (no store here: refused without creating one)
    Case("promote without a store", cli("promote", "some-model", "--version", "1", *NO_STORE),
         ("{cwd}/mlflow.db", "--tracking-uri")),
    Case("promote gates file missing", cli("promote", "some-model", "--version", "1", "--gates", "{cwd}/gates.yaml"),
         ("gates.yaml", "pass a YAML file")),
    Case("rollback without a store", cli("rollback", "some-model", *NO_STORE), ("{cwd}/mlflow.db", "--tracking-uri")),
    Case("serve not a models:/ URI", cli("serve", "not-a-uri", *NO_STORE), ("not-a-uri", "models:/NAME@champion")),
    Case("serve without a store", cli("serve", "models:/some-model@champion", *NO_STORE),
         ("{cwd}/mlflow.db", "--tracking-uri")),
    # submit, dashboard, assets
    Case("submit without a job server", cli("submit", "--no-install", "--address", "http://127.0.0.1:9", "--", "adapt"),
         ("http://127.0.0.1:9", "--address")),
    Case("submit --env not set", cli("submit", "--env", "VOCADAPT_TEST_UNSET_VARIABLE", "--", "adapt"),
         ("--env", "VOCADAPT_TEST_UNSET_VARIABLE=VALUE or export it")),
    Case("submit unknown command", cli("submit", "--no-install", "--", "frobnicate"), ("frobnicate", "submit --")),
    Case("submit unknown option of the command", cli("submit", "--no-install", "--", "adapt", "--frobnicate"),
         ("--frobnicate", "fix the arguments after `--`")),
    Case("submit config field misspelt", cli("submit", "--no-install", "--working-dir", str(REPOSITORY), "--", "adapt",
                                             "configs/italian-smollm2.yaml", "--set", "lapt.max_step=5"),
         ("lapt.max_step", "max_steps")),
    Case("dashboard without a store", cli("dashboard", *NO_STORE), ("{cwd}/mlflow.db", "--tracking-uri")),
    Case("assets unknown language", cli("assets", "--lang", "zz", "--home", "{cwd}/home"), ("zz", "choose from ca cs")),
    Case("assets unknown family", cli("assets", "--family", "llama5", "--home", "{cwd}/home"),
         ("llama5", "known: llama3_1")),
    Case("twin unknown family", cli("twin", "llama5", "--out", "{cwd}/twin"), ("llama5", "known: llama3_1")),
    Case("twin unknown width", cli("twin", "llama3_1", "--width", "huge", "--out", "{cwd}/twin"), ("huge", "reduced")),
    Case("twin --out inside its --hub-cache", cli("twin", "llama3_1", "--out", "{cwd}/hub/twin", "--hub-cache",
                                                  "{cwd}/hub"),
         ("--out {cwd}/hub/twin lies inside the input --hub-cache", "nothing was written"), _hub_cache),
    # damaged model folders, outputs over inputs, values out of bounds or of the wrong type (tests/bad_input generates
    # many more of each class; these rows are the README's summary)
    Case("adapt truncated safetensors", adapt(**{"source.model": "{cwd}/truncated"}),
         ("source.model", "model.safetensors", "truncated"), _truncated_model),
    Case("init truncated safetensors", cli("init", "--source-model", "{cwd}/truncated", "--target-tokenizer",
                                           "{w.target_tokenizer}", "--method", "fvt", "--out", "{cwd}/out"),
         ("--source-model", "model.safetensors", "truncated"), _truncated_model),
    Case("init two tokens on one id", cli("init", "--source-model", "{cwd}/dup-ids", "--target-tokenizer",
                                          "{w.target_tokenizer}", "--method", "fvt", "--out", "{cwd}/out"),
         ("tokenizer.json", "share id"), _two_tokens_on_one_id),
    Case("init --out is the source model, --overwrite", cli(*INIT[:-2], "--method", "fvt", "--out", "{w.model}",
                                                           "--overwrite"),
         ("--out {w.model} is the input --source-model", "nothing was written")),
    Case("init option of the wrong type", cli(*INIT, "--method", "multivariate", "--option", "jitter=abc"),
         ("jitter='abc'", "float expected")),
    Case("tokenizer train --out holds its corpus, --overwrite",
         cli(*TRAIN, "--vocab-size", "300", "--corpus", "{cwd}/out/corpus.txt", "--overwrite"),
         ("--out {cwd}/out holds the input --corpus", "nothing was written"), _corpus_inside_out),
    Case("tokenizer expand --top-k 0", cli(*EXPAND, "--top-k", "0", "--corpus", "{w.small}"),
         ("--top-k 0", "at least 1")),
    Case("adapt name leaves output_dir", adapt(name="../../x"), ("name", "one path component")),
    Case("adapt language lid.176 cannot check", adapt(**{"target.language": "xq"}), ("target.language", "xq")),
    Case("adapt target.language and target.languages both", adapt(**{"target.languages": "[de, hi]"}),
         ("both target.language", "target.languages: ['it', 'de', 'hi']")),
    Case("adapt a target language listed twice", adapt(**{"target.language": "", "target.languages": "[it, hi, it]"}),
         ("it listed twice in target.languages", "list each language once")),
    Case("adapt top-k above the target vocabulary", adapt(**{"init.mode": "expand", "tokenizer.expand_top_k": "9999",
                                                             "tokenizer.vocab_size": "600"}),
         ("tokenizer.expand_top_k", "never capped")),
    Case("adapt config key given twice", cli("adapt", "{cwd}/twice.yaml"), ("twice.yaml", "'name'", "twice"),
         _config_with_a_key_twice),
    Case("promote empty gates file", cli("promote", "some-model", "--version", "1", "--gates", "{cwd}/gates.yaml"),
         ("gates.yaml", "empty"), _empty_gates),
    Case("export unknown quantisation", cli("export", "{w.model}", "--quant", "q3", "--out", "{cwd}/m.gguf"),
         ("q3", "q4_k_m")),
    Case("export not a model folder", cli("export", "{cwd}/nowhere", "--out", "{cwd}/m.gguf"),
         ("{cwd}/nowhere", "models:/")),
    Case("promote --require-gguf unknown quantisation",
         cli("promote", "some-model", "--version", "1", "--require-gguf", "q3", *NO_STORE), ("q3", "q4_k_m, or any")),
    Case("export registered version without a store",
         cli("export", "models:/tiny/1", *NO_STORE, "--out", "{cwd}/m.gguf"), ("{cwd}/mlflow.db", "--tracking-uri")),
    Case("trim both a threshold and a size", cli(*TRIM, "--min-count", "2", "--size", "300"),
         ("--min-count", "--size", "not both")),
    Case("trim output exists", cli(*TRIM), ("--out {cwd}/out", "--overwrite"), setup=_existing_out),
    Case("trim corpus missing", cli("trim", "{w.model}", "--corpus", "{cwd}/no.txt", "--out", "{cwd}/out"),
         ("--corpus {cwd}/no.txt", "does not exist")),
    Case("trim no text", cli("trim", "{w.model}", "--out", "{cwd}/out"), ("--language", "--corpus")),
    Case("trim pickled weights", cli("trim", "{w.pickled}", "--corpus", "{w.corpora[it.train]}", "--out", "{cwd}/out"),
         ("pytorch_model.bin", "safetensors")),
    Case("trim size below the specials and bytes", cli(*TRIM, "--size", "10"), ("--size 10", "smaller than the")),
]


def _files(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*")}


def _logs() -> set[str]:
    from vocadapt.cli.errors import logs_dir

    return {path.name for path in logs_dir().glob("*.log")}


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_is_refused_naming_the_input_and_leaves_nothing(case: Case, world: World, tmp_path: Path,
                                                                  monkeypatch):
    cwd = tmp_path / "work"
    cwd.mkdir()
    if case.setup:
        case.setup(world, cwd)
    before, logs_before = _files(cwd), _logs()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("VOCADAPT_TEST_UNSET_VARIABLE", raising=False)
    args = case.args(world, cwd)
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    record_case(case.id, args, result, world_root=world.empty.parent, cwd=cwd)
    output = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert output.count("error:") == 1, output
    for name in case.named:
        assert " ".join(name.format(w=world, cwd=cwd).split()) in output, (name, output)
    assert _files(cwd) == before, sorted(_files(cwd) - before)  # no folder, no file, no store
    assert_no_mlflow_run(cwd)
    assert _logs() == logs_before  # a refusal, not an internal error (whose traceback goes to a log)


def test_the_table_covers_every_command():
    """At least 60 cases, and every command that takes input has some."""
    from vocadapt.cli.app import app as application

    commands = {c.name for c in application.registered_commands} | {"tokenizer"}
    covered = {case.id.split()[0] for case in CASES}
    assert len(CASES) >= 60
    assert commands - covered <= {"leaderboard"}, commands - covered  # leaderboard: added by another change


# ---- good input passes the same checks


@pytest.mark.parametrize("path", sorted((Path(__file__).parents[2] / "configs").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_config_passes_the_preflight(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["config", str(path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert not any(tmp_path.iterdir())


def test_config_check_files_accepts_good_files_and_writes_nothing(world, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "")
    result = CliRunner().invoke(app, config("--check-files")(world, tmp_path), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "expectation suite" in result.output and "name: tiny" in result.output
    assert not any(tmp_path.iterdir())


# ---- Ctrl-C and internal errors
