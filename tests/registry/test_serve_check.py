"""The check before registering: a checkpoint that would not serve as trained is refused, with the reason printed
and logged on its run, and no registered version exists.

Broken checkpoints are built from the tiny model: a tokenizer larger than the embedding (phantom ids), a config whose
vocabulary disagrees with the rows, a head that is not what the config says, and a tokenizer whose transformers
decode rewrites text that a server streams unchanged. The vLLM half of the decode check runs where the serving
environment exists (`python -m vocadapt.platform.evaluation.serving`); elsewhere it is reported as skipped, and a
test checks that it is never reported as passed there.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.registry.tiny_registry_world import build_tiny_model, lineage, log_adapted_runs

NAME = "vocadapt-it-checked"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model") / "model")


def _copy(tiny_model: Path, tmp_path: Path) -> Path:
    return shutil.copytree(tiny_model, tmp_path / "model")


def _edit_json(path: Path, **changes) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**data, **changes}), encoding="utf-8")


def _fewer_rows(model_dir: Path, rows: int) -> None:
    """The tokenizer keeps its 300 ids; the embedding (and config.vocab_size) shrink to ``rows``."""
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(model_dir, use_safetensors=True)
    model.resize_token_embeddings(rows)
    model.save_pretrained(model_dir)


def _untie(model_dir: Path, *, keep_head: bool, different: bool = False) -> None:
    """Rewrite the weights with an ``lm_head.weight`` (equal to the embeddings or not) or without one."""
    from safetensors.torch import load_file, save_file

    weights = load_file(model_dir / "model.safetensors")
    if keep_head:
        head = weights["model.embed_tokens.weight"].clone()
        weights["lm_head.weight"] = head + 1.0 if different else head
    save_file(weights, model_dir / "model.safetensors", metadata={"format": "pt"})


def _vllm_ran(finding) -> None:
    """A vLLM half reported as skipped skips the test with the serving environment's wording, which CI
    (VOCADAPT_REQUIRE_VLLM=1, tests/conftest.py) turns into a failure: there it must pass, not skip."""
    if finding.status == "skipped":
        pytest.skip(f"the serve check's vLLM half did not run: {finding.detail}")


def test_the_tiny_model_passes_and_every_check_is_reported(tiny_model, tmp_path):
    from vocadapt.platform.serving.serve_check import check_servable

    report = check_servable(_copy(tiny_model, tmp_path))
    statuses = {finding.check: finding.status for finding in report.findings}
    assert list(statuses) == ["embedding rows", "token ids", "head", "decode (streamed, tokenizers)",
                              "decode (vLLM)"], report.findings
    assert statuses["embedding rows"] == statuses["token ids"] == statuses["head"] == "pass"
    assert statuses["decode (streamed, tokenizers)"] == "pass"
    _vllm_ran(report.findings[-1])
    assert statuses["decode (vLLM)"] == "pass" and report.passed, report.findings


def test_a_tokenizer_vllm_decodes_differently_fails_the_vllm_half_naming_the_token(tiny_model, tmp_path):
    """transformers' decode with clean_up_tokenization_spaces rewrites " ," to ","; vLLM's engine streams the text
    unchanged. Run on vLLM itself (the check above it would stop registration first)."""
    import re

    from vocadapt.platform.model_loading import load_checkpoint_tokenizer
    from vocadapt.platform.serving.serve_check import check_decoding_vllm, probe_cases

    model_dir = _copy(tiny_model, tmp_path)
    _edit_json(model_dir / "tokenizer_config.json", clean_up_tokenization_spaces=True,
               clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output=True)
    tokenizer = load_checkpoint_tokenizer(model_dir)
    finding = check_decoding_vllm(model_dir, tokenizer, probe_cases(tokenizer))
    _vllm_ran(finding)
    assert finding.status == "fail", finding
    assert "vLLM streamed" in finding.detail and "virgola, punto." in finding.detail, finding.detail
    assert re.search(r"at token \d+ \(id \d+ '[^']+'\)", finding.detail), finding.detail


def test_one_vllm_probe_answers_every_check_of_the_process(tiny_model, tmp_path, monkeypatch):
    """vLLM's Python starts once per process (a sweep, or the family twins' adapts, registers several models): two
    folders outside the answer cache are answered by the same probe process, each as its own tokenizer decodes (the
    second's clean-up setting fails it, so nothing of the first folder's answer was reused)."""
    from vocadapt.platform.model_loading import load_checkpoint_tokenizer
    from vocadapt.platform.serving import serve_check
    from vocadapt.platform.serving.vllm_probe_process import VllmProbe

    monkeypatch.setattr(serve_check, "vllm_cache_file",
                        lambda folder, cases, python: tmp_path / "no-cache" / f"{Path(folder).name}.json")
    statuses, probes = [], []
    for name, clean_up in (("plain", False), ("cleaned", True)):
        model_dir = shutil.copytree(tiny_model, tmp_path / name)
        if clean_up:
            _edit_json(model_dir / "tokenizer_config.json", clean_up_tokenization_spaces=True,
                       clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output=True)
        tokenizer = load_checkpoint_tokenizer(model_dir)
        finding = serve_check.check_decoding_vllm(model_dir, tokenizer, serve_check.probe_cases(tokenizer))
        _vllm_ran(finding)
        statuses.append(finding.status)
        probes.append([probe.process.pid for probe in VllmProbe._running.values()])
    assert statuses == ["pass", "fail"], statuses
    assert len(probes[0]) == 1 and probes[0] == probes[1], probes


def test_a_vllm_report_that_encodes_differently_names_the_token(tiny_model):
    """The comparison itself, on a planted answer: vLLM's report is transformers' own, but one case's encoding has
    its third token replaced and another case's stream loses its last token."""
    from vocadapt.platform.model_loading import load_checkpoint_tokenizer
    from vocadapt.platform.serving.serve_check import compare_vllm_report, probe_cases, token_name

    tokenizer = load_checkpoint_tokenizer(tiny_model)
    cases = probe_cases(tokenizer)
    results = [{"encode": list(c["plain_ids"]),
                "decode": tokenizer.decode(c["prompt_ids"] + c["output_ids"], skip_special_tokens=True),
                "prompt_decode": tokenizer.decode(c["prompt_ids"], skip_special_tokens=True),
                "completion": tokenizer.decode(c["prompt_ids"] + c["output_ids"], skip_special_tokens=True)[
                    len(tokenizer.decode(c["prompt_ids"], skip_special_tokens=True)):]} for c in cases]
    report = {"detokenizer": "FastIncrementalDetokenizer", "results": results}
    assert compare_vllm_report(tokenizer, cases, report).status == "pass"
    planted = cases[0]["plain_ids"][2]
    results[0]["encode"][2] = planted + 1
    last = cases[2]["prompt_ids"] + cases[2]["output_ids"]
    results[2]["completion"] = tokenizer.decode(last[:-1], skip_special_tokens=True)[len(results[2]["prompt_decode"]):]
    finding = compare_vllm_report(tokenizer, cases, report)
    assert finding.status == "fail"
    assert (f"at token 2: transformers {token_name(tokenizer, planted)}, vLLM {token_name(tokenizer, planted + 1)}"
            in finding.detail), finding.detail
    assert f"at token {len(last) - 1} ({token_name(tokenizer, last[-1])})" in finding.detail, finding.detail
    results.pop()
    assert "vLLM answered" in compare_vllm_report(tokenizer, cases, report).detail


def test_without_the_serving_environment_the_vllm_half_is_skipped_not_passed(tiny_model, tmp_path):
    from vocadapt.platform.serving.serve_check import check_servable

    report = check_servable(_copy(tiny_model, tmp_path), serving_venv=tmp_path / "no-such-venv")
    vllm = next(finding for finding in report.findings if finding.check == "decode (vLLM)")
    assert vllm.status == "skipped" and "no vLLM serving environment" in vllm.detail
    assert report.passed


@pytest.mark.parametrize("breakage, check, message", [
    (lambda d: _fewer_rows(d, 280), "token ids", "20 tokenizer ids have no embedding row (ids >= 280"),
    (lambda d: _edit_json(d / "config.json", vocab_size=320), "embedding rows",
     "has 300 rows but config.vocab_size is 320"),
    (lambda d: _edit_json(d / "config.json", eos_token_id=300), "token ids",
     "config.json eos_token_id = 300 has no embedding row"),
    (lambda d: (_edit_json(d / "config.json", tie_word_embeddings=False), _untie(d, keep_head=False)), "head",
     "tie_word_embeddings is false but no lm_head.weight"),
    (lambda d: _untie(d, keep_head=True, different=True), "head", "lm_head.weight differs from"),
    (lambda d: _edit_json(d / "tokenizer_config.json", clean_up_tokenization_spaces=True,
                          clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output=True),
     "decode (streamed, tokenizers)", "virgola, punto."),
], ids=["tokenizer larger than the embedding", "config vocabulary larger than the rows", "phantom eos id",
        "untied without a head", "tied with a different head", "decode rewrites spaces"])
def test_a_broken_checkpoint_fails_its_check(tiny_model, tmp_path, breakage, check, message):
    from vocadapt.platform.serving.serve_check import check_servable

    model_dir = _copy(tiny_model, tmp_path)
    breakage(model_dir)
    report = check_servable(model_dir, vllm=False)
    failed = {finding.check: finding.detail for finding in report.failures}
    assert not report.passed and check in failed, report.findings
    assert message in failed[check]


def test_an_untied_head_stored_as_the_config_says_passes(tiny_model, tmp_path):
    from vocadapt.platform.serving.serve_check import check_servable

    model_dir = _copy(tiny_model, tmp_path)
    _edit_json(model_dir / "config.json", tie_word_embeddings=False)
    _untie(model_dir, keep_head=True, different=True)
    head = next(finding for finding in check_servable(model_dir, vllm=False).findings if finding.check == "head")
    assert head.status == "pass" and "untied" in head.detail


def test_registration_refuses_a_model_that_would_not_serve(tiny_model, tmp_path, capsys):
    """Tokenizer larger than the embedding: no registered model or version, no LoggedModel; the reason is printed
    (as the CLI prints a user error: one `error:` line, exit 2) and logged on the run."""
    import typer
    from mlflow import MlflowClient

    from tests.mlflow_server import mlflow_server
    from tests.registry.tiny_registry_world import credentials
    from vocadapt.cli.errors import user_errors
    from vocadapt.platform.registry.model_versions import SERVE_CHECK_FILE, register_model
    from vocadapt.platform.tracking import Tracker

    model_dir = _copy(tiny_model, tmp_path)
    _fewer_rows(model_dir, 280)
    with credentials(None, None), mlflow_server(tmp_path) as url:
        tracker = Tracker(url, "serve-check-tests")
        _, child = log_adapted_runs(tracker)
        with pytest.raises(typer.Exit) as stopped, user_errors():
            register_model(tracker, child, model_dir, NAME, lineage=lineage())
        assert stopped.value.exit_code == 2
        err = capsys.readouterr().err
        printed = " ".join(err[err.index("error:"):].split())  # after the loaders' progress bars
        assert f"error: {NAME} is not registered" in printed
        assert "token ids: 20 tokenizer ids have no embedding row" in printed and "Traceback" not in printed

        client = MlflowClient(url, registry_uri=url)
        assert client.search_registered_models() == []
        assert client.search_model_versions(f"name = '{NAME}'") == []
        assert client.search_logged_models([tracker.experiment_id]) == []
        assert client.get_run(child).data.tags["vocadapt.serve_check"] == "failed"
        logged = client.download_artifacts(child, SERVE_CHECK_FILE, str(tmp_path))
        record = json.loads(Path(logged).read_text(encoding="utf-8"))
    assert record["passed"] is False
    assert [f["check"] for f in record["findings"] if f["status"] == "fail"] == ["token ids"]
    assert not (model_dir / "vocadapt-manifest.json").exists()  # nothing was written for the refused model


PROMPT = "La capitale d'Italia è"


def _other_weights(model_dir: Path) -> None:
    """The same checkpoint with other weights: what a server that loaded the wrong file would answer with."""
    import torch
    from safetensors.torch import load_file, save_file

    weights = load_file(model_dir / "model.safetensors")
    generator = torch.Generator().manual_seed(1)
    weights = {name: tensor + torch.randn(tensor.shape, generator=generator) * tensor.std() for name, tensor in
               weights.items()}
    save_file(weights, model_dir / "model.safetensors", metadata={"format": "pt"})


def test_a_served_answer_is_compared_with_the_greedy_decode_naming_the_token(tiny_model, tmp_path):
    """An answer is accepted only when it is transformers' greedy one; a replaced answer, and the answer of a model
    whose served weights differ, are refused with the first token that differs."""
    from vocadapt.platform.model_loading import load_checkpoint_tokenizer
    from vocadapt.platform.serving.serve_check import greedy_decode, served_answer_mismatch, token_name

    tokenizer = load_checkpoint_tokenizer(tiny_model)
    expected = greedy_decode(tiny_model, PROMPT, 8)
    text = tokenizer.decode(expected, skip_special_tokens=True)
    assert len(expected) == 8 and text
    assert served_answer_mismatch(tokenizer, expected, text, expected) is None
    assert served_answer_mismatch(tokenizer, expected, text) is None
    replaced = served_answer_mismatch(tokenizer, expected, "garbage")
    assert replaced.startswith(f"the served answer differs from transformers' greedy decode at token 0 "
                               f"({token_name(tokenizer, expected[0])})"), replaced
    shifted = [expected[0], (expected[1] + 1) % len(tokenizer), *expected[2:]]
    assert f"at token 1: transformers {token_name(tokenizer, expected[1])}, served" in served_answer_mismatch(
        tokenizer, expected, text, shifted)

    other = _copy(tiny_model, tmp_path)
    _other_weights(other)
    served = greedy_decode(other, PROMPT, 8)
    mismatch = served_answer_mismatch(tokenizer, expected, tokenizer.decode(served, skip_special_tokens=True), served)
    assert mismatch is not None and "first tokens differ" in mismatch, (expected, served)


def test_the_pyfunc_answers_the_greedy_decode_and_a_pyfunc_of_other_weights_is_caught(tiny_model, tmp_path):
    """The pyfunc every registered version is logged as (`platform/registry/mlflow_model.py`), loaded from its checkpoint
    artifact as MLflow loads it, answers transformers' greedy completion; one that loaded other weights does not."""
    from types import SimpleNamespace

    from vocadapt.platform.registry.mlflow_model import CHECKPOINT, CausalLMPyfunc
    from vocadapt.platform.model_loading import load_checkpoint_tokenizer
    from vocadapt.platform.serving.serve_check import greedy_decode, served_answer_mismatch

    def pyfunc_answer(folder: Path) -> str:
        pyfunc = CausalLMPyfunc()
        pyfunc.load_context(SimpleNamespace(artifacts={CHECKPOINT: str(folder)}))
        answers = pyfunc.predict(None, [PROMPT], params={"max_new_tokens": 6})
        assert len(answers) == 1
        return answers[0]

    tokenizer = load_checkpoint_tokenizer(tiny_model)
    expected = greedy_decode(tiny_model, PROMPT, 6)
    assert served_answer_mismatch(tokenizer, expected, pyfunc_answer(tiny_model)) is None
    other = _copy(tiny_model, tmp_path)
    _other_weights(other)
    mismatch = served_answer_mismatch(tokenizer, expected, pyfunc_answer(other))
    assert mismatch is not None and "differs from transformers' greedy decode at token" in mismatch, mismatch


def test_the_vllm_answer_is_cached_by_tokenizer_and_config_not_by_vocadapt_records(tmp_path):
    """The same tokenizer and config meet vLLM's cached answer again though config.json's ``vocadapt_init`` (its
    timings) differs run to run; a config change that vLLM reads (vocab_size) is a new key."""
    from vocadapt.platform.serving.vllm_probe_process import vllm_cache_file

    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.touch()
    folders = []
    for run, (seconds, rows) in enumerate([(1.5, 300), (2.5, 300), (1.5, 320)]):
        folder = tmp_path / f"run-{run}"
        folder.mkdir()
        (folder / "tokenizer.json").write_text('{"model": "the same"}')
        (folder / "config.json").write_text(json.dumps({"vocab_size": rows, "vocadapt_init": {"seconds": seconds}}))
        folders.append(folder)
    keys = [vllm_cache_file(folder, [["ciao"]], python) for folder in folders]
    assert keys[0] == keys[1] != keys[2]
