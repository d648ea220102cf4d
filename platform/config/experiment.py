"""``ExperimentConfig``: one vocabulary-adaptation experiment, its sections, and the rules that span several of them
(what several target languages need, which strategies need an expansion, what LAPT takes from the experiment).
Imports nothing heavy.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from vocadapt.platform.config.sections import (
    CorpusSection, EvaluationSection, InitSection, MergeSection, SourceSection, TargetSection, TokenizerSection,
    TrackingSection,
)
from vocadapt.platform.config.lapt_sections import LaptSection
from vocadapt.platform.config.lapt_sections import Section as _Section


class ExperimentConfig(_Section):
    """One vocabulary-adaptation experiment."""

    name: str = Field("adapt", description="Run name, also the output folder's name: one path component (no "
                      "'/', not '.' or '..'), so the run's folder stays inside output_dir.")
    seed: int = Field(0, ge=0, description="Seed for every random choice: same config and seed, same bytes.")
    output_dir: str = Field("runs", description="Where run outputs (tokenizer, models) are written.")
    source: SourceSection = Field(default_factory=SourceSection)
    target: TargetSection
    corpus: CorpusSection = Field(default_factory=CorpusSection)
    tokenizer: TokenizerSection = Field(default_factory=TokenizerSection)
    init: InitSection = Field(default_factory=InitSection)
    evaluation: EvaluationSection = Field(default_factory=EvaluationSection)
    lapt: LaptSection = Field(default_factory=LaptSection)
    merge: MergeSection = Field(default_factory=MergeSection)
    tracking: TrackingSection = Field(default_factory=TrackingSection)

    @field_validator("name")
    @classmethod
    def _one_path_component(cls, name: str) -> str:
        if not name.strip() or name in (".", "..") or any(mark in name for mark in ("/", "\\", "\0")):
            raise ValueError(f"{name!r} is not a folder name: the run's folder is output_dir/name/language, so name "
                             "must be one path component (letters, digits, '-', '_', '.'; no '/', not '.' or '..')")
        return name

    @model_validator(mode="after")
    def _top_k_within_the_vocabulary(self) -> ExperimentConfig:
        top_k = self.tokenizer.expand_top_k
        if top_k is not None and not self.tokenizer.pretrained and top_k > self.tokenizer.vocab_size:
            raise ValueError(f"tokenizer.expand_top_k {top_k:,} is more than the {self.tokenizer.vocab_size:,} tokens "
                             "of the target tokenizer it picks from (tokenizer.vocab_size); it is used as written, "
                             "never capped: lower it or raise tokenizer.vocab_size")
        return self

    @model_validator(mode="after")
    def _several_languages(self) -> ExperimentConfig:
        """Several target languages read the embedded corpora (one file list cannot say which language is which),
        train their own tokenizers, and LAPT mixes one stream per language: ``lapt.mixing``'s ``target`` share is
        split evenly over them unless it names a ``target_<code>`` stream for each further language."""
        from vocadapt.components.training.settings import language_stream

        languages = self.target.languages or []
        further = [language_stream(language, languages[0]) for language in languages[1:]]
        if self.corpus.languages and (self.corpus.train == "embedded" or not self.target.multilingual):
            raise ValueError(f"corpus.languages gives files for {sorted(self.corpus.languages)}, which only a run "
                             "with several target.languages and corpus files reads: drop corpus.languages, or list "
                             "those languages in target.languages and give corpus.train files")
        named = [stream for stream in self.lapt.mixing if stream.startswith("target_")]
        strays = sorted(set(named) - set(further))
        if strays:
            raise ValueError(f"lapt.mixing names {', '.join(strays)}, which is not a further language of "
                             f"target.languages {languages}: name target_<code> streams only for the languages "
                             "after the first (the first is 'target')")
        if not self.target.multilingual:
            return self
        if self.corpus.train != "embedded" and set(self.corpus.languages) != set(languages[1:]):
            raise ValueError(f"corpus.languages lists {sorted(self.corpus.languages) or 'no language'}, and the "
                             f"languages after the first of target.languages {languages} are {languages[1:]}: give "
                             "each of those its files, corpus.languages.<code>: {train: [...], validation: [...]} "
                             "(corpus.train and corpus.validation are the first language's), or use corpus.train: "
                             "embedded")
        if self.tokenizer.pretrained:
            raise ValueError("tokenizer.pretrained is one language's tokenizer, and target.languages lists "
                             f"{languages}: leave tokenizer.pretrained unset (a tokenizer is trained per language "
                             "for expansion, one on their balanced mix for replacement)")
        if named and set(named) != set(further):
            missing = sorted(set(further) - set(named))
            raise ValueError(f"lapt.mixing gives shares to {', '.join(named)} but not to {', '.join(missing)}: give "
                             "every further language its target_<code> share, or none (the target share is then "
                             "split evenly)")
        if not named and "target" in self.lapt.mixing:
            share = self.lapt.mixing["target"] / len(languages)
            mixing = {stream: value for stream, value in self.lapt.mixing.items() if stream != "target"}
            self.lapt.mixing = {"target": share, **{stream: share for stream in further}, **mixing}
        return self

    @model_validator(mode="after")
    def _corpus_files_listed(self) -> ExperimentConfig:
        if self.corpus.train != "embedded" and not self.corpus.validation:
            raise ValueError("corpus.validation is required when corpus.train lists files; give held-out files")
        return self

    @model_validator(mode="after")
    def _head_fit_needs_an_expansion(self) -> ExperimentConfig:
        if self.lapt.strategy == "new-rows" and self.init.mode != "expand":
            raise ValueError(f"lapt.strategy new-rows trains only the embedding and LM-head rows an expansion "
                             f"added, keeping the source rows, and init.mode {self.init.mode!r} keeps no source "
                             "rows: set init.mode expand, or another lapt.strategy (embeddings, full)")
        fits = "lapt.strategy new-head" if self.lapt.strategy == "new-head" else (
            "lapt.head_fit_after" if self.lapt.head_fit_after else None)
        if fits and self.init.mode != "expand":
            raise ValueError(f"{fits} fits the LM-head rows an expansion added, and init.mode is "
                             f"{self.init.mode!r}: set init.mode expand, or another lapt.strategy / "
                             "lapt.head_fit_after false")
        return self

    @model_validator(mode="after")
    def _merge_needs_an_expansion(self) -> ExperimentConfig:
        if self.merge.method != "none" and self.init.mode != "expand":
            raise ValueError(f"merge.method {self.merge.method} merges back into the source chat model, which needs "
                             f"the source's ids first (init.mode expand), and init.mode is {self.init.mode!r}: set "
                             "init.mode expand, or merge.method none")
        return self

    @model_validator(mode="after")
    def _lapt_follows_the_experiment(self) -> ExperimentConfig:
        """LAPT draws from the experiment's seed, and scores held-out text with the evaluation section's windows
        (after-LAPT bits per byte compares with the zero-shot figures), unless the ``lapt`` section says otherwise."""
        given = self.lapt.model_fields_set
        for field, value in (("seed", self.seed), ("eval_max_length", self.evaluation.max_length),
                             ("eval_batch_size", self.evaluation.batch_size)):
            if field not in given:
                setattr(self.lapt, field, value)
        return self

    def flat(self) -> dict[str, Any]:
        """Dotted keys to scalar values, for logging as params."""
        return _flatten(self.model_dump(mode="json"))


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat
