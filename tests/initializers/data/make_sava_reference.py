"""Writes sava_latentis_reference.json: SAVA rows produced with latentis (0.0.8, in .venv) configured as the SAVA
authors describe it (SAVA Appendix A: standard scaling and L2 normalisation of both sides before the map, latentis'
SGDAffineAligner trained with Adam for 1,000 steps at learning rate 1e-3, the inverse scaling after), on a tiny
fixed case, for tests/initializers/test_authors_reference.py. Not run by the tests; run it by hand:

    .venv/bin/python tests/initializers/data/make_sava_reference.py

The normalisation is latentis' own: ``StandardScaling`` then ``MeanLPNorm`` (each row divided by its norm; the
inverse multiplies by the mean norm of the rows it was fitted on), on the helper side and on the source side, inside
a ``Translator``. The case: helper vectors related to the source rows by an affine map plus noise (as a helper
model's embeddings relate to the source's only roughly), shared tokens with shuffled source ids.
"""

import json
from pathlib import Path

import numpy as np
import torch
from latentis.transform import TransformSequence
from latentis.transform.base import MeanLPNorm, StandardScaling
from latentis.transform.translate.aligner import SGDAffineAligner, Translator

generator = torch.Generator().manual_seed(2504)
shared, new, helper_dim, hidden, source_vocab, seed = 80, 12, 12, 16, 90, 17025
helper = torch.randn(shared + new, helper_dim, generator=generator) * torch.linspace(0.5, 2.0, helper_dim) + 0.3
planted = torch.randn(helper_dim, hidden, generator=generator) / helper_dim**0.5
source = torch.randn(source_vocab, hidden, generator=generator) * 0.8 + torch.linspace(-1, 1, hidden)
source_ids = torch.randperm(source_vocab, generator=generator)[:shared]
source[source_ids] = helper[:shared] @ planted + 0.4 + 0.5 * torch.randn(shared, hidden, generator=generator)
helper, source = (torch.from_numpy(np.round(t.numpy(), 6)) for t in (helper, source))  # what the JSON holds

translator = Translator(
    aligner=SGDAffineAligner(num_steps=1000, lr=1e-3, random_seed=seed),
    x_transform=TransformSequence([StandardScaling(), MeanLPNorm()]),
    y_transform=TransformSequence([StandardScaling(), MeanLPNorm()]),
)
translator.fit(helper[:shared], source[source_ids])
with torch.no_grad():
    rows, _ = translator.transform(helper[shared:])


def six_decimals(matrix: torch.Tensor) -> list[list[float]]:
    """Rows as short decimals; a float32 rounded to 6 decimals reads back as the same float32."""
    return [[round(value, 6) for value in row] for row in matrix.tolist()]


out = Path(__file__).with_name("sava_latentis_reference.json")
out.write_text(json.dumps({
    "made_by": "latentis 0.0.8 Translator(SGDAffineAligner(1000, 1e-3), StandardScaling + MeanLPNorm on both sides) "
               "(make_sava_reference.py)",
    "helper": six_decimals(helper),
    "source": six_decimals(source),
    "overlap": {str(t): int(source_ids[t]) for t in range(shared)},
    "new_ids": list(range(shared, shared + new)),
    "rows": six_decimals(rows),
}, separators=(",", ":")) + "\n")
print(f"wrote {out}: {new} new tokens, {shared} shared")
