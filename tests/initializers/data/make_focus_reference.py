"""Writes focus_deepfocus_reference.json: FOCUS rows produced by the authors' package, deepfocus 1.0.1 from PyPI, on a
tiny fixed case, for tests/initializers/test_authors_reference.py. Not run by the tests; run it by hand in a
throwaway venv that borrows torch and numpy from .venv (deepfocus pulls fastdist and numba, which .venv must not get):

    python3.11 -m venv /tmp/dfvenv
    echo $PWD/.venv/lib/python3.11/site-packages > /tmp/dfvenv/lib/python3.11/site-packages/zz_main.pth
    /tmp/dfvenv/bin/pip install --no-deps deepfocus==1.0.1 fastdist numba llvmlite print-on-steroids
    /tmp/dfvenv/bin/python tests/initializers/data/make_focus_reference.py

(seen working with fastdist 1.1.7, numba 0.68.1, llvmlite 0.50.0, numpy 2.4.6, torch 2.13.0.)

The case: helper ("fastText") vectors for shared and new target tokens, the source rows of the shared tokens (with
a common offset, as real embedding rows have), an overlap whose source ids are shuffled, one shared token without a
helper vector (deepfocus leaves it out of the anchors, as vocadapt does). The rows come from deepfocus'
``focus_additional_token_initialization``, the part of ``FOCUS`` that turns auxiliary vectors into rows (cosine
similarities by fastdist, entmax.sparsemax on each row, the convex combination of the anchors' source rows).
"""

import json
from pathlib import Path

import numpy as np
import torch
from deepfocus.focus import focus_additional_token_initialization
from deepfocus.vocab_helper import NewToken, OverlappingToken, TokenClass

generator = torch.Generator().manual_seed(1807)
shared, new, helper_dim, hidden, source_vocab = 60, 12, 10, 8, 70
# fastText-like helper vectors: clustered (a few topics), so sparsemax keeps several neighbours, not one.
topics = torch.randn(6, helper_dim, generator=generator)
topic_of = torch.randint(0, 6, (shared + new,), generator=generator)
helper = topics[topic_of] + 0.6 * torch.randn(shared + new, helper_dim, generator=generator)
source = torch.randn(source_vocab, hidden, generator=generator) + torch.linspace(-1, 1, hidden)
source_ids = torch.randperm(source_vocab, generator=generator)[:shared]
helper, source = (torch.from_numpy(np.round(t.numpy(), 6)) for t in (helper, source))  # what the JSON holds
no_vector = 7  # a shared target token without a helper vector: not an anchor


def token(kind: str, index: int) -> TokenClass:
    name = f"{kind}{index}"
    return TokenClass(name, index, name, name, name, name, False, kind)


overlapping = {}
for target_id in range(shared):
    if target_id == no_vector:
        continue
    info = OverlappingToken(source=[token("source", int(source_ids[target_id]))], target=token("target", target_id))
    info.source_embedding = source[int(source_ids[target_id])]
    info.auxiliary_embedding = helper[target_id].numpy()
    overlapping[f"target{target_id}"] = info
new_tokens = {}
for target_id in range(shared, shared + new):
    info = NewToken(target=token("target", target_id))
    info.auxiliary_embedding = helper[target_id].numpy()
    new_tokens[f"target{target_id}"] = info

target_embeddings = torch.zeros(shared + new, hidden)
rows = focus_additional_token_initialization(overlapping, new_tokens, target_embeddings, device="cpu")[shared:]


def six_decimals(matrix: torch.Tensor) -> list[list[float]]:
    """Rows as short decimals; a float32 rounded to 6 decimals reads back as the same float32."""
    return [[round(value, 6) for value in row] for row in matrix.tolist()]


out = Path(__file__).with_name("focus_deepfocus_reference.json")
out.write_text(json.dumps({
    "made_by": "deepfocus 1.0.1 focus_additional_token_initialization (make_focus_reference.py)",
    "helper": six_decimals(helper),
    "helper_known": [target_id != no_vector for target_id in range(shared + new)],
    "source": six_decimals(source),
    "overlap": {str(t): int(source_ids[t]) for t in range(shared)},
    "new_ids": list(range(shared, shared + new)),
    "rows": six_decimals(rows),
}, separators=(",", ":")) + "\n")
print(f"wrote {out}: {new} new tokens, {shared - 1} anchors")
