"""WECHSEL: the authors' rows on a tiny case, a planted rotation recovered, both modes, tied and untied heads, the
command line, and the platform's embedded inputs (FreeDict dictd parsing, 'embedded' resolution and its errors).

The tiny fastText models, dictionary and reference rows in data/ come from data/make_wechsel_reference.py (the
authors' package wechsel 0.0.4); nothing here trains fastText, which is not repeatable on a few hundred lines.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.initializers.tiny_world import tiny_llama
from vocadapt.components.errors import UserError
from vocadapt.components.initializers import InitProblem, get_initializer
from vocadapt.components.initializers.wechsel import orthogonal_procrustes, token_words, wechsel_neighbours

DATA = Path(__file__).parent / "data"
FILES = {
    "source_vectors": str(DATA / "wechsel_source.bin"),
    "target_vectors": str(DATA / "wechsel_target.bin"),
    "dictionary": str(DATA / "wechsel_dictionary.txt"),
}


def _tokenizer(tree: dict):
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(tree)), bos_token="<|endoftext|>",
                                   eos_token="<|endoftext|>", pad_token="<pad>")


@pytest.fixture(scope="module")
def reference() -> dict:
    stored = json.loads((DATA / "wechsel_reference.json").read_text(encoding="utf-8"))
    stored["source"], stored["target"] = _tokenizer(stored["source_tokenizer"]), _tokenizer(stored["target_tokenizer"])
    return stored


def _problem(source_matrix, ids, source, target, **fields) -> InitProblem:
    return InitProblem(source_matrix=source_matrix, new_target_ids=torch.as_tensor(ids, dtype=torch.long), overlap={},
                       source_tokenizer=source, target_tokenizer=target, **fields)


def test_rows_match_the_authors_package(reference):
    """Every target token the authors' code found a vector for, except the specials it copies and the ties at the
    10th neighbour (see the script), gets the authors' row; the one it found none for gets none here either."""
    source_matrix = torch.tensor(reference["source_matrix"])
    expected = torch.tensor(reference["target_matrix"])
    target = reference["target"]
    ids = [i for i in range(len(target)) if i not in reference["copied_specials"]]
    problem = _problem(source_matrix, ids, reference["source"], target)
    rows = get_initializer("wechsel").function(problem, **FILES)
    _, _, has_vector = wechsel_neighbours(problem, *FILES.values(), neighbors=10, temperature=0.1)
    assert [i for i, found in zip(ids, has_vector.tolist()) if not found] == reference["not_found"]
    compared = [n for n, i in enumerate(ids) if i not in reference["not_found"] + reference["tied_at_boundary"]]
    assert len(compared) > 120  # of 168
    cosine = torch.nn.functional.cosine_similarity(rows[compared], expected[[ids[n] for n in compared]], dim=1)
    assert cosine.min() >= 0.99
    torch.testing.assert_close(rows[compared], expected[[ids[n] for n in compared]], atol=1e-4, rtol=1e-4)


def test_orthogonal_procrustes_recovers_a_planted_rotation():
    generator = torch.Generator().manual_seed(0)
    source = torch.randn(200, 16, generator=generator, dtype=torch.float64)
    rotation, _ = torch.linalg.qr(torch.randn(16, 16, generator=generator, dtype=torch.float64))
    torch.testing.assert_close(orthogonal_procrustes(source, source @ rotation), rotation)


def _rotated_model(tmp_path: Path, rotation: torch.Tensor) -> str:
    """The source fastText model with every input vector (words and n-grams) rotated: a 'target language' whose
    vector for any word is exactly the source vector times ``rotation``."""
    import fasttext

    model = fasttext.load_model(FILES["source_vectors"])
    rotated = model.get_input_matrix() @ rotation.numpy().astype("float32")
    model.set_matrices(rotated, model.get_output_matrix())
    path = tmp_path / "rotated.bin"
    model.save_model(str(path))
    return str(path)


def test_planted_rotation_sends_every_token_to_its_own_word(tmp_path, reference):
    """Target vectors = source vectors rotated; with the rotation learnt from a dictionary of the same words, each
    token's nearest source token has its word, so with one neighbour its row is that word's row. A dictionary
    pairing the wrong words learns another rotation and the rows go elsewhere."""
    import fasttext

    generator = torch.Generator().manual_seed(1)
    rotation, _ = torch.linalg.qr(torch.randn(16, 16, generator=generator, dtype=torch.float64))
    rotated = _rotated_model(tmp_path, rotation)
    vocabulary = [w for w in fasttext.load_model(FILES["source_vectors"]).words if w.isalpha()]
    (tmp_path / "same.txt").write_text("".join(f"{w}\t{w}\n" for w in vocabulary), encoding="utf-8")
    shifted = vocabulary[1:] + vocabulary[:1]
    (tmp_path / "wrong.txt").write_text("".join(f"{a}\t{b}\n" for a, b in zip(vocabulary, shifted)), encoding="utf-8")
    tokenizer = reference["source"]
    words = token_words(tokenizer, len(tokenizer))
    distinct = sorted(set(words))
    word_rows = torch.randn(len(distinct), 8, generator=generator)
    source_matrix = torch.stack([word_rows[distinct.index(word)] for word in words])  # one row per word
    ids = [i for i, word in enumerate(words) if word]
    options = dict(source_vectors=FILES["source_vectors"], target_vectors=rotated, neighbors=1)
    rows = get_initializer("wechsel").function(_problem(source_matrix, ids, tokenizer, tokenizer),
                                               dictionary=str(tmp_path / "same.txt"), **options)
    torch.testing.assert_close(rows, source_matrix[ids])
    wrong = get_initializer("wechsel").function(_problem(source_matrix, ids, tokenizer, tokenizer),
                                                dictionary=str(tmp_path / "wrong.txt"), **options)
    assert (wrong - source_matrix[ids]).abs().amax(1).gt(1e-3).float().mean() > 0.5


@pytest.mark.parametrize("mode", ["replace", "expand"])
@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_surgery_sets_new_rows_from_each_matrix(mode, tied, source_tokenizer, target_tokenizer, expanded_tokenizer):
    """Through the surgery: shared rows copied, new rows WECHSEL's, an untied head from the head's own rows with
    the same neighbours (role-independent), and the same bytes twice."""
    from vocadapt.components.surgery import Initialisation, RowLayout, adapt_embeddings, plan_vocabulary

    target = target_tokenizer if mode == "replace" else expanded_tokenizer

    def adapt():
        model = tiny_llama(len(source_tokenizer), tied)
        before = (model.get_input_embeddings().weight.detach().clone(),
                  model.get_output_embeddings().weight.detach().clone())
        adapt_embeddings(model, Initialisation("wechsel", options=FILES, seed=3), source_tokenizer=source_tokenizer,
                         target_tokenizer=target, layout=RowLayout(mode))
        return model, before

    model, (source_input, source_output) = adapt()
    plan = plan_vocabulary(source_tokenizer, target, source_rows=source_input.shape[0], layout=RowLayout(mode))
    new_ids = torch.as_tensor(plan.new_target_ids)
    problem = _problem(source_input, new_ids, source_tokenizer, target)
    indices, weights, has_vector = wechsel_neighbours(problem, *FILES.values(), neighbors=10, temperature=0.1)
    assert has_vector.float().mean() > 0.8
    for matrix, source_rows in ((model.get_input_embeddings().weight, source_input),
                                (model.get_output_embeddings().weight, source_output)):
        expected = (weights.unsqueeze(2) * source_rows[indices]).sum(1)  # the neighbours' rows of this matrix
        torch.testing.assert_close(matrix.detach()[new_ids[has_vector]], expected)
    if not tied:
        assert not torch.equal(model.get_output_embeddings().weight[new_ids], model.get_input_embeddings().weight[new_ids])
    assert model.config.vocadapt_init["options"]["dictionary"] == FILES["dictionary"]
    again, _ = adapt()
    assert torch.equal(again.get_input_embeddings().weight, model.get_input_embeddings().weight)
    assert torch.equal(again.get_output_embeddings().weight, model.get_output_embeddings().weight)


def test_bad_inputs_name_the_option_and_the_fix(tmp_path, reference):
    source_matrix = torch.tensor(reference["source_matrix"])
    problem = _problem(source_matrix, [40, 41], reference["source"], reference["target"])
    method = get_initializer("wechsel").function
    with pytest.raises(UserError, match="source_vectors is 'embedded'.*vocadapt adapt.*--option source_vectors=PATH"):
        method(problem)
    with pytest.raises(UserError, match="dictionary: .*nope.txt does not exist"):
        method(problem, **{**FILES, "dictionary": str(tmp_path / "nope.txt")})
    (tmp_path / "text.bin").write_text("not a model")
    with pytest.raises(UserError, match="target_vectors: .*text.bin is not a fastText model"):
        method(problem, **{**FILES, "target_vectors": str(tmp_path / "text.bin")})
    (tmp_path / "foreign.txt").write_text("xylophone\tzanzara\n", encoding="utf-8")
    with pytest.raises(UserError, match="no pair of .*foreign.txt has both words"):
        method(problem, **{**FILES, "dictionary": str(tmp_path / "foreign.txt")})
    with pytest.raises(ValueError, match="neighbors >= 1"):
        method(problem, **FILES, neighbors=0)
    with pytest.raises(ValueError, match=r"unseen random\|fvt, got .*'zero'"):
        method(problem, **FILES, unseen="zero")


def test_command_line_init_with_wechsel(tmp_path, source_tokenizer, target_tokenizer):
    from typer.testing import CliRunner

    from vocadapt.cli.app import app

    source_dir = tmp_path / "source"
    tiny_llama(len(source_tokenizer), tied=False).save_pretrained(source_dir)
    source_tokenizer.save_pretrained(source_dir)
    target_tokenizer.save_pretrained(tmp_path / "target")
    options = [part for name, path in FILES.items() for part in ("--option", f"{name}={path}")]
    arguments = ["init", "--source-model", str(source_dir), "--target-tokenizer", str(tmp_path / "target"),
                 "--method", "wechsel"]
    result = CliRunner().invoke(app, [*arguments, "--out", str(tmp_path / "out"), *options])
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "out" / "vocadapt_init.json").read_text())
    assert record["method"] == "wechsel" and record["options"]["target_vectors"] == FILES["target_vectors"]
    bare = CliRunner().invoke(app, [*arguments, "--out", str(tmp_path / "bare")])
    assert bare.exit_code == 2 and "error:" in bare.output and "--option source_vectors=PATH" in bare.output
    assert "Traceback" not in bare.output and not (tmp_path / "bare").exists()


# --- the platform: FreeDict and 'embedded' --------------------------------------------------------------------


def _dictd(entries: list[str]) -> tuple[str, bytes]:
    """A dictd database (index text, data bytes) holding ``entries``, each 'headword /ipa/\\nsense lines'."""
    digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

    def number(value: int) -> str:
        text = ""
        while True:
            text, value = digits[value % 64] + text, value // 64
            if value == 0:
                return text

    data, index = b"00-database-info\nabout\n", [f"00databaseinfo\tA\t{number(23)}"]
    for entry in entries:
        body = (entry + "\n").encode("utf-8")
        index.append(f"{entry.split()[0].lower()}\t{number(len(data))}\t{number(len(body))}")  # dictd lowers it
        data += body
    return "\n".join(index) + "\n", data


def test_dictd_pairs_take_the_first_single_word_translation_of_each_sense():
    from vocadapt.platform.assets.word_vectors import dictd_number, dictd_pairs

    assert dictd_number("C6q") == 2 * 64 * 64 + 58 * 64 + 42
    index, data = _dictd([
        "abacus /ˈabakəs/\n1. abaco\n2. pallottoliere",
        "aberration /ˌabəɹˈeɪʃən/\nerrore, sbaglio",
        "about /ɐbˈaʊt/\n1. concernere\n2. circa, verso\n3. intorno a",
        "ability /ɐbˈɪləti/\nabilità (formal), capacità",
        "Achilles' /ɐkˈɪliːz/\ntallone d'Achille",
        "Abissinia /abissˈinia/\nAbyssinia",
    ])
    assert dictd_pairs(index, data) == [
        ("abacus", "abaco"), ("abacus", "pallottoliere"), ("aberration", "errore"), ("about", "concernere"),
        ("about", "circa"), ("ability", "abilità"), ("Abissinia", "Abyssinia"),
    ]


class _Assets:
    def __init__(self, home: Path, manifest: dict) -> None:
        self.home, self.manifest = home, manifest


def test_embedded_options_resolve_to_the_built_files_or_name_the_fix(tmp_path):
    from vocadapt.platform.assets.embedded import resolve_wechsel_options

    built = {"word_vectors": {"en": {"file": "word_vectors/en.bin"}, "it": {"file": "word_vectors/it.bin"}},
             "dictionaries": {"en-it": {"file": "dictionaries/en-it.txt"}}}
    resolved = resolve_wechsel_options({"neighbors": 5}, "en", "it", _Assets(tmp_path, built))
    assert resolved == {"neighbors": 5, "source_vectors": str(tmp_path / "word_vectors/en.bin"),
                        "target_vectors": str(tmp_path / "word_vectors/it.bin"),
                        "dictionary": str(tmp_path / "dictionaries/en-it.txt")}
    own = resolve_wechsel_options({"dictionary": FILES["dictionary"]}, "en", "it", _Assets(tmp_path, built))
    assert own["dictionary"] == FILES["dictionary"]
    assert resolve_wechsel_options(FILES, "en", "it", assets=None) == FILES  # nothing embedded: assets not read
    offline = {**built, "dictionaries": {"en-it": {"missing": "could not download dict-freedict-eng-ita (offline)"}}}
    with pytest.raises(UserError, match=r"dictionary: .*could not build.*offline.*apt-get update.*--force"):
        resolve_wechsel_options({}, "en", "it", _Assets(tmp_path, offline))
    with pytest.raises(UserError, match=r"target_vectors: .*no word_vectors for de: run `vocadapt assets --lang de`"):
        resolve_wechsel_options({}, "en", "de", _Assets(tmp_path, built))
    with pytest.raises(UserError, match="source_vectors: .*missing.bin does not exist"):
        resolve_wechsel_options({"source_vectors": str(tmp_path / "missing.bin")}, "en", "it", _Assets(tmp_path, built))


def test_a_sweep_checks_wechsel_files_before_any_trial(tmp_path, monkeypatch):
    """A sweep over WECHSEL's temperature resolves its files once per trial config; one naming it without files on a
    machine without `vocadapt assets` stops before any trial, naming the command."""
    from vocadapt.pipelines.preflight import resolve_methods
    from vocadapt.pipelines.sweep import check_methods
    from vocadapt.platform.sweeps.tune import load_sweep_config, trial_experiment, validate_sweep

    (tmp_path / "base.yaml").write_text(json.dumps({"name": "base", "target": {"language": "it"},
                                                    "init": {"options": {"wechsel": FILES}}}))
    (tmp_path / "sweep.yaml").write_text("name: s\nbase: base.yaml\nsearch_space:\n  init.methods: {grid: [wechsel]}\n"
                                         "  init.options.wechsel.temperature: {grid: [0.05, 0.1]}\n")
    sweep = load_sweep_config(tmp_path / "sweep.yaml")
    check_methods(sweep)
    trials = [trial_experiment(sweep.base_tree(), combination) for combination in validate_sweep(sweep)]
    options = [resolve_methods(trial)["wechsel"].options for trial in trials]
    assert [o["temperature"] for o in options] == [0.05, 0.1] and all(o["dictionary"] == FILES["dictionary"]
                                                                      for o in options)
    (tmp_path / "base.yaml").write_text(json.dumps({"name": "base", "target": {"language": "it"}}))
    (tmp_path / "bare.yaml").write_text("name: s\nbase: base.yaml\nsearch_space:\n  init.methods: {grid: [fvt, wechsel]}\n")
    monkeypatch.setenv("VOCADAPT_HOME", str(tmp_path / "empty-home"))
    with pytest.raises(UserError, match="search_space.init.methods: .*run `vocadapt assets`"):
        check_methods(load_sweep_config(tmp_path / "bare.yaml"))


def test_without_apt_the_dictionary_is_recorded_missing_with_the_reason(tmp_path, monkeypatch):
    """No apt-get (or no network): the build records why, and resolving 'embedded' then names the fix."""
    from rich.console import Console

    from vocadapt.platform.assets import builders as asset_builders
    from vocadapt.platform.assets.embedded import resolve_wechsel_options
    from vocadapt.platform.assets.word_vectors import build_dictionary

    monkeypatch.setattr(asset_builders.shutil, "which", lambda name: None)
    entry = build_dictionary("it", tmp_path / "downloads", tmp_path / "work", Console(quiet=True))
    assert "file" not in entry and "apt-get or dpkg-deb is not available" in entry["missing"]
    assert "dict-freedict-eng-ita" in entry["missing"] and "dict-freedict-ita-eng" in entry["missing"]
    assert "knows no FreeDict" in build_dictionary("xx", tmp_path, tmp_path, Console(quiet=True))["missing"]
    manifest = {"word_vectors": {"en": {"file": "en.bin"}, "it": {"file": "it.bin"}}, "dictionaries": {"en-it": entry}}
    with pytest.raises(UserError, match="apt-get or dpkg-deb is not available.*apt-get update.*init.options.wechsel"):
        resolve_wechsel_options({}, "en", "it", _Assets(tmp_path, manifest))
