"""FOCUS, SAVA and Align with their default options give the rows the authors' own code gives on tiny fixed cases.

The reference rows were made once by the authors' code and are committed beside the scripts that made them
(tests/initializers/data/make_{focus,sava,align}_reference.py): deepfocus 1.0.1 from PyPI, latentis configured as
SAVA's Appendix A describes, gucci-j/lowres-cve's ``align_init.py``. Rows are compared by their cosine after
subtracting the mean source row (the shared offset alone would make unrelated rows look alike), per row; each test
also checks that the variant vocadapt shipped before misses, so the case can tell the two apart.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from vocadapt.components.helpers import TokenVectors
from vocadapt.components.initializers import InitProblem, get_initializer

DATA = Path(__file__).parent / "data"
MATCH = 0.99  # per-row centred cosine that counts as the authors' row


def _reference(name: str) -> dict:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def _centred_cosines(rows: torch.Tensor, reference: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    centre = source.mean(0)
    return torch.nn.functional.cosine_similarity(rows.float() - centre, reference.float() - centre, dim=1)


def _helper_problem(reference: dict, known: list[bool] | None = None) -> tuple[InitProblem, torch.Tensor]:
    vectors = torch.tensor(reference["helper"])
    known_mask = torch.tensor(known) if known is not None else torch.ones(len(vectors), dtype=torch.bool)
    source = torch.tensor(reference["source"])
    problem = InitProblem(
        source_matrix=source, new_target_ids=torch.tensor(reference["new_ids"]),
        overlap={int(target): source_id for target, source_id in reference["overlap"].items()},
        source_tokenizer=None, target_tokenizer=object(),
        helper=TokenVectors(vectors, known_mask, "vectors", "authors' reference case"),
    )
    return problem, source


def test_focus_defaults_match_deepfocus():
    reference = _reference("focus_deepfocus_reference.json")
    problem, source = _helper_problem(reference, reference["helper_known"])
    expected = torch.tensor(reference["rows"])
    cosines = _centred_cosines(get_initializer("focus").function(problem), expected, source)
    assert cosines.min() >= MATCH and cosines.mean() >= MATCH, cosines
    assert torch.allclose(get_initializer("focus").function(problem), expected, atol=1e-5)  # the same arithmetic
    sharpened = _centred_cosines(get_initializer("focus").function(problem, temperature=0.1), expected, source)
    assert sharpened.min() < MATCH


def test_sava_defaults_match_latentis_as_the_authors_configure_it():
    reference = _reference("sava_latentis_reference.json")
    problem, source = _helper_problem(reference)
    expected = torch.tensor(reference["rows"])
    cosines = _centred_cosines(get_initializer("sava").function(problem), expected, source)
    assert cosines.min() >= MATCH and cosines.mean() >= MATCH, cosines
    paired = _centred_cosines(get_initializer("sava").function(problem, normalise="paired"), expected, source)
    assert paired.min() < MATCH


def _fast_tokenizer(spec: dict):
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(spec)))


@pytest.fixture(scope="module")
def align_case(tmp_path_factory):
    reference = _reference("align_lowres_cve_reference.json")
    corpus = tmp_path_factory.mktemp("align-reference") / "italian.txt"
    corpus.write_text("\n".join(reference["corpus"]) + "\n", encoding="utf-8")
    return reference, str(corpus)


@pytest.mark.parametrize("case", ["expand", "replace"])
def test_align_defaults_match_lowres_cve(align_case, case):
    """expand: the authors' setting (new tokens appended to the source tokenizer, Merge rows for the tokens the
    corpus never aligns); replace: a separately trained target tokenizer, where the span rule decides the tuples."""
    reference, corpus = align_case
    source_tokenizer = _fast_tokenizer(reference["source_tokenizer"])
    target_tokenizer = _fast_tokenizer(reference["expanded_tokenizer" if case == "expand" else "target_tokenizer"])
    source_vocab = source_tokenizer.get_vocab()
    overlap = {target_id: source_vocab[token] for token, target_id in target_tokenizer.get_vocab().items()
               if token in source_vocab}
    source = torch.tensor(reference["source"], dtype=torch.float32)
    part = reference[case]
    problem = InitProblem(
        source_matrix=source, new_target_ids=torch.tensor(part["new_ids"]), overlap=overlap,
        source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer, corpus_files=[corpus],
    )
    positions = [part["new_ids"].index(token) for token in part["ids"]]
    expected = torch.tensor(part["rows"])
    cosines = _centred_cosines(get_initializer("align").function(problem)[positions], expected, source)
    assert len(positions) >= 40 and cosines.min() >= MATCH and cosines.mean() >= MATCH, cosines
    before = get_initializer("align").function(problem, spans="overlapping", unseen="fvt")[positions]
    assert _centred_cosines(before, expected, source).min() < MATCH
