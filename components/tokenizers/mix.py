"""Balanced text from several languages, for one tokenizer trained on their mix (replacement with several target
languages): each language gives the same number of lines, so the largest corpus does not decide the vocabulary."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from vocadapt.components.errors import UserError


def balanced_mix(lines: Mapping[str, Sequence[str]], max_lines: int | None = None, seed: int = 0) -> list[str]:
    """Equal shares of every language's non-empty lines, interleaved in a seeded order.

    Each language gives ``min(smallest language's line count, max_lines // number of languages)`` lines (all of the
    smallest language's when ``max_lines`` is None): a seeded sample of its lines, kept in corpus order. The result
    is shuffled with the same seed, so a trainer that reads a prefix still sees every language."""
    if not lines:
        raise UserError("no languages to mix; give at least one language's lines")
    kept = {language: [line for line in texts if line.strip()] for language, texts in lines.items()}
    empty = sorted(language for language, texts in kept.items() if not texts)
    if empty:
        raise UserError(f"no text for {', '.join(empty)} to mix into the tokenizer's training text; give each "
                        "target language a corpus with text")
    share = min(len(texts) for texts in kept.values())
    if max_lines is not None:
        if max_lines < len(kept):
            raise UserError(f"max_lines {max_lines} is fewer than one line per language ({len(kept)} languages); "
                            "give at least one line per language")
        share = min(share, max_lines // len(kept))
    rng = random.Random(seed)
    mixed: list[str] = []
    for language in sorted(kept):
        texts = kept[language]
        picked = sorted(rng.sample(range(len(texts)), share))
        mixed += [texts[i] for i in picked]
    rng.shuffle(mixed)
    return mixed

