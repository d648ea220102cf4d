"""benchmarks/family_fertility.py's --quick path on two real family tokenizers (one byte-level, one sentencepiece)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmarks.loading import load_benchmark

pytestmark = pytest.mark.timeout(600)

FAMILIES = ("llama3_1", "mistral_v1")
SIZES = (20, 60)


@pytest.fixture(scope="module")
def quick_matrix(embedded_assets, family_tokenizers, tmp_path_factory):
    script = load_benchmark("family_fertility")
    out = tmp_path_factory.mktemp("family-fertility")
    script.main(["--quick", "--families", *FAMILIES, "--languages", "it", "en", "--no-out-of-domain",
                 "--expand-sizes", *map(str, SIZES), "--out", str(out)])  # fmt: skip
    return json.loads((out / "matrix.json").read_text(encoding="utf-8"))


def _row(matrix: dict, family: str, variant: str, language: str) -> dict:
    return next(row for row in matrix["rows"] if (row["family"], row["variant"], row["language"], row["text"])
                == (family, variant, language, "held-out"))


def test_every_family_variant_and_text_is_measured(quick_matrix):
    variants = ["source", "replace", *(f"expand+{k}" for k in SIZES)]
    assert list(quick_matrix["families"]) == list(FAMILIES)
    for family in FAMILIES:
        assert list(quick_matrix["families"][family]["variants"]) == variants
    assert len(quick_matrix["rows"]) == len(FAMILIES) * len(variants) * 2
    assert quick_matrix["settings"]["target_size"] == 2000 and quick_matrix["texts"]["it/held-out"]["documents"] == 100


def test_source_fertility_is_tokens_per_whitespace_word(quick_matrix, load_family_tokenizer, embedded_assets):
    documents = [line for line in embedded_assets.corpus("it", "test").read_text(encoding="utf-8").splitlines()
                 if line.strip()][:100]
    words = sum(len(document.split()) for document in documents)
    for family in FAMILIES:
        tokenizer = load_family_tokenizer(family)
        tokens = sum(len(ids) for ids in tokenizer(documents, add_special_tokens=False)["input_ids"])
        assert _row(quick_matrix, family, "source", "it")["tokens_per_word"] == pytest.approx(tokens / words)


def test_expansion_shortens_italian_and_leaves_english_alone(quick_matrix):
    for family in FAMILIES:
        variants = quick_matrix["families"][family]["variants"]
        small, large = (_row(quick_matrix, family, f"expand+{k}", "it")["reduction"] for k in SIZES)
        assert 0 < small < large, (family, small, large)
        for k in SIZES:
            assert abs(_row(quick_matrix, family, f"expand+{k}", "en")["reduction"]) < 0.01
            expanded = variants[f"expand+{k}"]
            assert 0 < expanded["new_tokens"] <= k
            assert expanded["vocab_size"] == variants["source"]["vocab_size"] + expanded["new_tokens"]
        # an Italian-only tokenizer of 2,000 tokens replacing the family's spends far more on English
        assert _row(quick_matrix, family, "replace", "en")["reduction"] < -0.5
