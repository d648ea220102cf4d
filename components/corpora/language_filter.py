"""Keep only the units whose target-language text is in the target language.

The LibreOffice help translations are partial: untranslated paragraphs stay in English. A language-id function
(``vocadapt.components.language_id.identify_languages``) decides which to keep; it is passed in, so this stays pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from vocadapt.components.corpora.splits import AlignedUnit


@dataclass(frozen=True)
class LanguageFilterResult:
    """The units kept, and how many were dropped under each label the language id gave them instead."""

    kept: list[AlignedUnit]
    dropped_by_label: dict[str, int]

    @property
    def dropped(self) -> int:
        return sum(self.dropped_by_label.values())


def keep_language(
    units: Sequence[AlignedUnit],
    language: str,
    expected_label: str,
    identify: Callable[[Sequence[str]], list[str]],
) -> LanguageFilterResult:
    """Units whose ``texts[language]`` ``identify`` labels ``expected_label``; the others counted by label."""
    labels = identify([unit.texts[language] for unit in units])
    kept, dropped = [], Counter()
    for unit, label in zip(units, labels, strict=True):
        if label == expected_label:
            kept.append(unit)
        else:
            dropped[label] += 1
    return LanguageFilterResult(kept=kept, dropped_by_label=dict(dropped.most_common()))
