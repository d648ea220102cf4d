"""Generation efficiency as "Design choices" Table 3 and "0.01GB" Table 3 measure it.

- tokens per second: generated tokens (never padding, never the prompt) over wall time;
- characters per second: generated characters over wall time, the one rate comparable across tokenizers;
- examples per second: the "throughput" of "Design choices" §4.4;
- tokens per character: what generating the same text costs in tokens, with no clock involved (the promise of a
  new vocabulary, checked by a promotion gate);
- %Gen: the share of generated tokens that come from the new vocabulary (tokens the source model did not have);
- speed-up: the adapted model's rate over the source model's on the same prompts, measured side by side.

A model with fewer, longer tokens can have the same tokens per second and still finish sooner, so speed-up is
reported for all three rates; characters per second is the headline.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

RATES = ("tokens_per_second", "characters_per_second", "examples_per_second")


@dataclass(frozen=True)
class GenerationRecord:
    """What one backend produced for one list of prompts.

    Attributes:
        texts: the generated continuation of each prompt (stop string removed).
        token_ids: the generated token ids of each prompt, without prompt or padding tokens.
        seconds: wall-clock time for the whole list, including prompt processing.
    """

    texts: list[str]
    token_ids: list[list[int]]
    seconds: float

    def __post_init__(self) -> None:
        if len(self.texts) != len(self.token_ids):
            raise ValueError(f"{len(self.texts)} texts but {len(self.token_ids)} token id lists: one per prompt")
        if self.seconds <= 0:
            raise ValueError(f"seconds must be positive, got {self.seconds}: time the generation with perf_counter")


def generation_efficiency(record: GenerationRecord, new_token_ids: Collection[int] | None = None) -> dict[str, float]:
    """Rates, lengths and (when ``new_token_ids`` is given) %Gen of one generation record."""
    tokens = sum(len(ids) for ids in record.token_ids)
    characters = sum(len(text) for text in record.texts)
    examples = len(record.texts)
    report = {
        "tokens_per_second": tokens / record.seconds,
        "characters_per_second": characters / record.seconds,
        "examples_per_second": examples / record.seconds,
        "generated_tokens": float(tokens),
        "generated_characters": float(characters),
        "tokens_per_example": tokens / max(examples, 1),
        "tokens_per_character": tokens / max(characters, 1),
        "seconds": record.seconds,
    }
    if new_token_ids is not None:
        report["percent_generated_new"] = percent_generated_new(record.token_ids, new_token_ids)
    return report


def same_text_token_saving(record: GenerationRecord, source_tokenizer) -> float:
    """1 - generated tokens / the source tokenizer's tokens for the same generated texts (0 when nothing was
    generated; below 0 when the model spells its text in more pieces than the source tokenizer would). Unlike
    tokens per character it does not move with what a model writes, only with the tokens it chose."""
    generated = sum(len(ids) for ids in record.token_ids)
    needed = sum(len(source_tokenizer(text, add_special_tokens=False)["input_ids"]) for text in record.texts)
    return 1.0 - generated / needed if needed else 0.0


def percent_generated_new(token_ids: Sequence[Sequence[int]], new_token_ids: Collection[int]) -> float:
    """%Gen: 100 x generated tokens in ``new_token_ids`` / all generated tokens (0 when nothing was generated)."""
    new = set(new_token_ids)
    total = sum(len(ids) for ids in token_ids)
    if total == 0:
        return 0.0
    return 100.0 * sum(token in new for ids in token_ids for token in ids) / total


def speed_up(adapted: Mapping[str, float], source: Mapping[str, float]) -> dict[str, float]:
    """Each rate of the adapted model over the source model's (above 1: the adapted model is faster)."""
    ratios = {}
    for rate in RATES:
        if rate not in adapted or rate not in source:
            raise KeyError(f"both reports need {rate!r}: build them with generation_efficiency()")
        if source[rate] <= 0:
            raise ValueError(f"the source model's {rate} is {source[rate]}: it generated nothing to compare against")
        ratios[rate] = adapted[rate] / source[rate]
    return ratios
