"""Helper embeddings for the initialisers that need one (CLP, FOCUS, SAVA, SALT): a vector for each target token.

Three kinds (SAVA §3.1, SALT §3 step 1, "0.01GB" §4.2):

- ``fasttext``: a fastText model trained on the corpus tokenized with the target tokenizer (offline default);
- ``model``: a Hugging Face model that already uses the target tokenizer (its input embeddings);
- ``vectors``: a static vectors file in the ``.vec`` text format, keyed by the target tokenizer's token strings.

:func:`resolve_helper` turns the config's ``init.helper`` string into a :class:`TokenVectors`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vocadapt.components.helpers.token_vectors import TokenVectors

HELPER_KINDS = ("fasttext", "model", "vectors")


def _options(text: str) -> dict[str, str]:
    options = {}
    for part in filter(None, text.split(",")):
        if "=" not in part:
            raise ValueError(f"helper option {part!r} is not name=value; write e.g. fasttext:dim=100,epoch=5")
        name, value = part.split("=", 1)
        options[name.strip()] = value.strip()
    return options


def resolve_helper(
    spec: str | None,
    *,
    target_tokenizer: Any,
    corpus_files: list[str] | tuple[str, ...] = (),
    seed: int = 0,
) -> TokenVectors | None:
    """The helper a config names, built for ``target_tokenizer``; None for no helper.

    spec: None, "" or "none" (no helper); "fasttext" or "fasttext:dim=100,epoch=5,min_count=1" (trained on
        ``corpus_files`` tokenized with the target tokenizer); "model:DIR" or a model directory (its input
        embeddings; its tokenizer must be the target tokenizer); "vectors:FILE" or a ``.vec`` file.
    """
    if spec is None or spec.strip().lower() in ("", "none"):
        return None
    spec = spec.strip()
    if spec == "fasttext" or spec.startswith("fasttext:"):
        from vocadapt.components.helpers.fasttext_helper import FastTextSettings, train_fasttext_helper

        options = _options(spec.partition(":")[2])
        settings = FastTextSettings(**_typed_fasttext(options))
        return train_fasttext_helper(target_tokenizer, list(corpus_files), settings, seed=seed)
    kind, _, location = spec.partition(":")
    if kind not in ("model", "vectors"):
        kind, location = ("vectors" if spec.endswith(".vec") else "model"), spec
    path = Path(location).expanduser()
    if not path.exists():
        raise ValueError(
            f"helper {spec!r}: {path} does not exist; give 'fasttext', 'model:DIR' (a model using the target "
            "tokenizer) or 'vectors:FILE.vec'"
        )
    if kind == "vectors":
        from vocadapt.components.helpers.vectors_file import read_vectors_file

        return read_vectors_file(path, target_tokenizer)
    from vocadapt.components.helpers.model_helper import model_embeddings_helper

    return model_embeddings_helper(path, target_tokenizer)


def _typed_fasttext(options: dict[str, str]) -> dict[str, Any]:
    known = {"dim": int, "epoch": int, "min_count": int, "minn": int, "maxn": int, "ws": int, "max_lines": int}
    unknown = set(options) - set(known)
    if unknown:
        raise ValueError(f"fasttext helper has no option(s) {sorted(unknown)}; it accepts {sorted(known)}")
    return {name: known[name](value) for name, value in options.items()}


__all__ = ["HELPER_KINDS", "TokenVectors", "resolve_helper"]
