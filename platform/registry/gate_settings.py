"""The promotion gates' settings: ``Margin``, a gate's allowance stated as absolute or relative, and
``PromotionGates``, every gate with its default margin and its rule in words (what a ``--gates`` file, a sweep or a
version's recorded gates give). Validation only; ``gate_verdicts.py`` applies them, ``gates.py`` lists the gates.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from vocadapt.components.evaluation.bootstrap import DEFAULT_RESAMPLES
from vocadapt.platform.config.lapt_sections import Section


class Margin(Section):
    """A gate's allowance, stated as exactly one of ``absolute`` (in the metric's own units) or ``relative`` (a
    fraction of the source model's value): ``{absolute: 1.0}`` or ``{relative: 0.05}`` in YAML. Gates do not share
    a scale (accuracy is 0-1, chrF 0-100, bits per byte about 1-6), so a bare number is refused."""

    absolute: float | None = Field(
        None, ge=0, description="Allowance in the metric's own units (accuracy points as a fraction, chrF points, "
        "bits per byte, tokens per word)."
    )
    relative: float | None = Field(
        None, ge=0, description="Allowance as a fraction of the source model's value (0.05: 5% of it)."
    )

    @model_validator(mode="before")
    @classmethod
    def _kind_is_stated(cls, data: Any) -> Any:
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            raise ValueError(f"a bare number ({data}) does not say whether the margin is absolute or relative; "
                             f"write {{absolute: {data}}} (metric units) or {{relative: {data}}} (fraction)")
        return data

    @model_validator(mode="after")
    def _exactly_one(self) -> Margin:
        if (self.absolute is None) == (self.relative is None):
            raise ValueError("give exactly one of absolute (metric units) or relative (fraction of the source's value)")
        return self

    def allowance(self, reference: float) -> float:
        """The margin in the metric's units, for a source-model value of ``reference``."""
        return self.absolute if self.absolute is not None else self.relative * abs(reference)

    def describe(self) -> str:
        if self.absolute is not None:
            return f"{self.absolute:g} absolute"
        return f"{self.relative * 100:g}% relative"


def _relative(fraction: float) -> Margin:
    return Margin(relative=fraction)


def _absolute(amount: float) -> Margin:
    return Margin(absolute=amount)


# Margins of the benchmark measures vocadapt logs (platform/evaluation/harness.py): accuracies are fractions in
# [0, 1], sacrebleu's chrF is in [0, 100]. Two accuracy points and one chrF point.
DEFAULT_BENCHMARK_MARGINS = {"acc": 0.02, "acc_norm": 0.02, "acc_bytes": 0.02, "chrf": 1.0}
# The flat keys of the first gate schema, with the per-gate form that replaces each.
_REPLACED_KEYS = {
    "target_bpb_margin": "target_bpb: {relative: X}",
    "source_bpb_margin": "source_bpb: {relative: X}",
    "min_fertility_reduction": "target_fertility_reduction: {relative: X}",
    "benchmark_margin": "benchmarks: {acc_bytes: {absolute: X}, chrf: {absolute: Y}, ...} (one margin per measure)",
}


class PromotionGates(Section):
    """What a model version must show before an alias (``champion``) moves to it. Each gate states its own margin,
    absolute or relative (see ``Margin``); the reference is always the source model's value, logged by the same
    pipeline (``source_model.*``)."""

    target_bpb: Margin = Field(
        default_factory=lambda: _relative(0.0), description="Target-language bits per byte on out-of-domain text "
        "(bpb_ood_target; see bpb_text) may exceed the source model's by at most this margin (relative 0: no "
        "worse than the source). Rule: the upper end of the 95% interval of candidate - source (documents "
        "resampled, both models on the same ones) is at most the margin; undecided when only the estimate is."
    )
    source_bpb: Margin = Field(
        default_factory=lambda: _relative(0.25), description="Source-language (English) bits per byte on "
        "out-of-domain text (bpb_ood_source) may exceed the source model's by at most this margin (the "
        "forgetting check). Rule as target_bpb."
    )
    bpb_text: Literal["out_of_domain", "held_out"] = Field(
        "out_of_domain", description="Which text the bits-per-byte gates read: 'out_of_domain' (bpb_ood_*, text "
        "no training saw: evaluation.out_of_domain_text) or 'held_out' (bpb_*_after_lapt, else _zero_shot: the "
        "training corpora's held-out split, which flatters an adapted model; for runs that predate out-of-domain "
        "metrics). No per-document parts are logged for the held-out split: judge it with require_intervals "
        "false."
    )
    require_intervals: bool = Field(
        True, description="A gate without an interval (no per-item parts in the run's gates/items.json, no "
        "standard errors) is undecided, not passed. false: such a gate is judged on its point estimate."
    )
    bootstrap_resamples: int = Field(
        DEFAULT_RESAMPLES, ge=100, description="Resamples of the paired bootstrap behind each gate's 95% interval."
    )
    bootstrap_seed: int = Field(0, description="Seed of the bootstrap's draws: same items and seed, same intervals.")
    target_fertility_reduction: Margin = Field(
        default_factory=lambda: _relative(0.10), description="Target-language tokens per word must be lower with "
        "the target tokenizer than with the source tokenizer by at least this much (relative: a fraction, < 1). "
        "Rule: the upper end of the interval of target - source tokens per word (held-out documents resampled) "
        "is at most minus the margin."
    )
    generated_tokens_per_character: Margin = Field(
        default_factory=lambda: _relative(0.10), description="The candidate's generations on the evaluation "
        "prompts must take at least this much fewer tokens per character than the source model's (relative 0.10: "
        "10% fewer; metric generation.tokens_per_character, logged by `vocadapt evaluate`). Deterministic: counts, "
        "no clock. A vocabulary that is shorter on the corpus but never used when generating fails it. Rule: the "
        "upper end of the interval of candidate - source (prompts resampled) is at most minus the margin."
    )
    generated_token_saving: Margin = Field(
        default_factory=lambda: _absolute(0.10), description="The candidate's generations must take at least this "
        "share fewer tokens than the source tokenizer needs for the same generated text (absolute 0.10: 10% fewer; "
        "metric generation.same_text_token_saving, logged by `vocadapt adapt` and `vocadapt evaluate`). Tokens per "
        "character also move with *what* a model writes (copying more of an English prompt is cheaper per "
        "character): this one compares two tokenizations of one text, so only the new tokens the model chose to "
        "write pass it. Deterministic: counts, no clock. Rule: the lower end of its interval (prompts "
        "resampled) is at least the margin."
    )
    benchmarks: dict[str, Margin] = Field(
        default_factory=lambda: {key: _absolute(value) for key, value in DEFAULT_BENCHMARK_MARGINS.items()},
        description="How far each benchmark score (metric benchmark.<task>.<measure>, higher is better) may fall "
        "below the source model's (source_model.benchmark.<task>.<measure>), keyed by '<task>.<measure>' or by "
        "'<measure>' (acc, acc_bytes, chrf; the task's own key wins). A given mapping replaces the defaults "
        "(acc, acc_norm, acc_bytes: 0.02 absolute; chrf: 1.0 absolute). A benchmark without a margin fails. "
        "Rule: the candidate is not worse than the source beyond its interval: the upper end of the 95% interval "
        "of candidate - source (items resampled; chrF from sacrebleu's statistics) is at least minus the margin.",
    )
    require_benchmarks: bool = Field(
        False, description="Refuse when no benchmark scores were logged (otherwise that gate is skipped)."
    )

    @model_validator(mode="before")
    @classmethod
    def _no_shared_margins(cls, data: Any) -> Any:
        old = [key for key in _REPLACED_KEYS if isinstance(data, Mapping) and key in data]
        if old:
            fixes = "; ".join(f"{key} -> {_REPLACED_KEYS[key]}" for key in old)
            raise ValueError(f"{', '.join(old)}: a bare margin does not say its kind or unit; each gate now states "
                             f"its own margin, absolute or relative: {fixes}")
        return data

    @field_validator("generated_token_saving")
    @classmethod
    def _saving_is_absolute(cls, margin: Margin) -> Margin:
        if margin.absolute is None or margin.absolute >= 1:
            raise ValueError("the token saving is already a share of the source tokenizer's tokens: give it as "
                             "{absolute: X} with X below 1 (0.10: at least 10% fewer tokens on the same text)")
        return margin

    @field_validator("target_fertility_reduction", "generated_tokens_per_character")
    @classmethod
    def _reduction_below_one(cls, margin: Margin) -> Margin:
        if margin.relative is not None and margin.relative >= 1:
            raise ValueError(f"a relative reduction of {margin.relative:g} asks for zero tokens; give a "
                             f"fraction below 1 (0.10: at least 10% fewer)")
        return margin

    def benchmark_margin(self, key: str) -> Margin | None:
        """The margin for ``benchmark.<task>.<measure>``: its own entry, else its measure's, else None."""
        name = key.removeprefix("benchmark.")
        return self.benchmarks.get(name) or self.benchmarks.get(name.rsplit(".", 1)[-1])
