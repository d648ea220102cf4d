"""Writes omp_tokensurgeon_reference.json: rows produced by mergekit's own ``batch_omp`` on a tiny random case,
for tests/initializers/test_omp.py. Not run by the tests; run it by hand with a mergekit checkout:

    git -C MERGEKIT show a6e4028:mergekit/tokensurgeon/omp.py > /tmp/mk/tokensurgeon_snapshot/omp.py
    git -C MERGEKIT show a6e4028:mergekit/tokensurgeon/rope_helpers.py > /tmp/mk/tokensurgeon_snapshot/rope_helpers.py
    touch /tmp/mk/tokensurgeon_snapshot/__init__.py
    PYTHONPATH=/tmp/mk .venv/bin/python tests/initializers/data/make_omp_reference.py

(mergekit @ a6e4028, the snapshot the specification was read at; only torch is needed to import the module.)
"""

import json
from pathlib import Path

import torch
from tokensurgeon_snapshot.omp import batch_omp

generator = torch.Generator().manual_seed(2506)
shared, new, helper_dim, hidden, k = 40, 6, 32, 5, 6
helper = torch.randn(shared + new, helper_dim, generator=generator)
source = torch.randn(shared, hidden, generator=generator)
indices, coefficients = batch_omp(helper[shared:], helper[:shared], k)  # float32, as tokensurgeon's CLI runs it
rows = torch.einsum("nk,nkh->nh", coefficients, source[indices])
out = Path(__file__).with_name("omp_tokensurgeon_reference.json")
out.write_text(json.dumps({
    "k": k, "helper": helper.tolist(), "source": source.tolist(),
    "indices": indices.tolist(), "rows": rows.tolist(),
}) + "\n")
print(f"wrote {out}: {new} new tokens, {shared} shared, k = {k}")
