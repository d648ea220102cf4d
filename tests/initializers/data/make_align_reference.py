"""Writes align_lowres_cve_reference.json: Align rows produced by the authors' own code (gucci-j/lowres-cve,
``initialization/src/core/align_init.py``, commit 3ed1f7d) on two tiny cases, for
tests/initializers/test_authors_reference.py. Not run by the tests; run it by hand with a lowres-cve checkout:

    mkdir -p /tmp/lowres
    git -C LOWRES_CVE show 3ed1f7d:initialization/src/core/align_init.py > /tmp/lowres/lowres_align_init.py
    HF_DATASETS_OFFLINE=1 PYTHONPATH=/tmp/lowres:. .venv/bin/python tests/initializers/data/make_align_reference.py

(the module needs numpy, torch, transformers and datasets, all in .venv.)

"expand", the authors' setting: an English byte-level BPE source tokenizer, the same tokenizer expanded with
Italian merges (the tiny world's ``expand_bpe``), random source rows, an Italian corpus. Their pipeline as
``instantiate_model_by_align`` runs it: ``_init_by_merge`` first, then ``_init_by_align`` over the same matrix, so a
new token the corpus never aligns keeps its Merge row. Two adjustments, neither touching their arithmetic: the new
rows start as NaN instead of unseeded random draws (a token neither step sets stays NaN and is left out of the
comparison), and ``_init_by_merge`` reads the merges through a view that spells them "a b", the format tokenizers
stored when their code was written (tokenizers 0.23 stores pairs, which their ``merge.split(" ")`` cannot read).

"replace": the same source tokenizer and a separately trained Italian tokenizer (vocabulary replacement, where
target and source tokens do not nest, so the span rule matters). ``_init_by_align`` reads source rows and writes
target rows in one matrix; in replacement the two id ranges collide, so its writes are collected aside
(``WrittenAside``) while its reads see the source rows unchanged.

Tokenizers, corpus and source rows are stored with the rows, so the test does not depend on tokenizer training
staying byte-identical.
"""

import json
import tempfile
import types
from pathlib import Path

import numpy as np
from lowres_align_init import _init_by_align, _init_by_merge

from tests.initializers.tiny_world import ENGLISH, ITALIAN, bytelevel_tokenizer, expand_bpe, synthetic_lines


class WrittenAside(np.ndarray):
    """A matrix whose item assignments go to ``written`` (id -> row) instead of the matrix itself."""

    def __setitem__(self, index, value):
        self.written[int(index)] = np.array(value, dtype=np.float64)


def merges_as_strings(tokenizer):
    """A view of ``tokenizer`` for ``_init_by_merge``: get_vocab, and the model state with merges spelt "a b"."""
    state = json.loads(tokenizer.backend_tokenizer.model.__getstate__())
    state["merges"] = [" ".join(merge) if isinstance(merge, list) else merge for merge in state["merges"]]
    model = types.SimpleNamespace(__getstate__=lambda: json.dumps(state))
    return types.SimpleNamespace(get_vocab=tokenizer.get_vocab, backend_tokenizer=types.SimpleNamespace(model=model))


source_tokenizer = bytelevel_tokenizer(synthetic_lines(ENGLISH, 300, seed=1) + ITALIAN[:1], vocab_size=300)
italian = synthetic_lines(ITALIAN, 160, seed=3)
target_tokenizer = bytelevel_tokenizer(italian, vocab_size=360)
expanded = expand_bpe(source_tokenizer, target_tokenizer, max_new=60)
source_rows = np.round(np.random.default_rng(1234).normal(size=(len(source_tokenizer), 8)) + np.linspace(-1, 1, 8), 6)

with tempfile.TemporaryDirectory() as folder:
    corpus = str(Path(folder) / "italian.txt")
    Path(corpus).write_text("\n".join(italian) + "\n", encoding="utf-8")
    # expand: Merge, then Align over the same rows
    embeddings = np.full((len(expanded), 8), np.nan)
    embeddings[: len(source_rows)] = source_rows
    embeddings, _ = _init_by_merge(None, source_tokenizer, merges_as_strings(expanded), source_rows, embeddings,
                                   None, None, tie_word_embeddings=True)
    embeddings, _ = _init_by_align(source_tokenizer, expanded, embeddings, None, corpus, consider_mean=False)
    # replace: Align alone, its writes collected aside
    aside = source_rows.copy().view(WrittenAside)
    aside.written = {}
    _init_by_align(source_tokenizer, target_tokenizer, aside, None, corpus, consider_mean=False)

new_ids = list(range(len(source_rows), len(expanded)))
expand_ids = [i for i in new_ids if not np.isnan(embeddings[i]).any()]
source_vocab = source_tokenizer.get_vocab()
replace_new = sorted(i for token, i in target_tokenizer.get_vocab().items() if token not in source_vocab)
replace_ids = sorted(aside.written)
out = Path(__file__).with_name("align_lowres_cve_reference.json")
out.write_text(json.dumps({
    "made_by": "gucci-j/lowres-cve@3ed1f7d _init_by_merge + _init_by_align (expand), _init_by_align (replace), "
               "consider_mean=False (make_align_reference.py)",
    "source_tokenizer": json.loads(source_tokenizer.backend_tokenizer.to_str()),
    "expanded_tokenizer": json.loads(expanded.backend_tokenizer.to_str()),
    "target_tokenizer": json.loads(target_tokenizer.backend_tokenizer.to_str()),
    "corpus": italian,
    "source": source_rows.tolist(),
    "expand": {"new_ids": new_ids, "ids": expand_ids, "rows": np.round(embeddings[expand_ids], 6).tolist()},
    "replace": {"new_ids": replace_new, "ids": replace_ids,
                "rows": np.round(np.stack([aside.written[i] for i in replace_ids]), 6).tolist()},
}, separators=(",", ":")) + "\n")
print(f"wrote {out}: expand {len(expand_ids)} of {len(new_ids)} new rows set; "
      f"replace {len(replace_ids)} of {len(replace_new)} aligned")
