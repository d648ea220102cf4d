"""The typed settings of one LAPT run: the one definition of every field the training loop reads.

The platform's ``LaptSection`` (``platform/config/lapt_sections.py``) is this model plus the edge-only fields (files and
datasets, Ray workers, DeepSpeed, storage); it is validated once, in the config, and the same object reaches the
Ray workers and :func:`~vocadapt.components.training.train_lapt`. Unknown keys are refused with the nearest valid
name (:class:`~vocadapt.components.typed_settings.StrictSettings`).
"""

from __future__ import annotations

import re
from typing import Any, Literal, get_args

from pydantic import Field, field_validator, model_validator

from vocadapt.components.typed_settings import StrictSettings

Strategy = Literal["full", "lora", "two-stage", "2x2-ls", "embeddings", "new-head", "new-rows"]
Objective = Literal["clm", "mtp", "distill", "clm+distill", "mtp+distill"]
STRATEGIES: tuple[str, ...] = get_args(Strategy)
OBJECTIVES: tuple[str, ...] = get_args(Objective)
STREAMS = ("target", "source")
# with several target languages, the first is the ``target`` stream and each further one ``target_<code>``
_LANGUAGE_STREAM = re.compile(r"^target_[a-z]{2,3}(-[a-z]{2,4})?$")


def is_stream(name: str) -> bool:
    """``target``, ``source`` or ``target_<language code>`` (a further target language: ``target_de``)."""
    return name in STREAMS or bool(_LANGUAGE_STREAM.match(name))


def language_stream(language: str, primary: str) -> str:
    """The stream name of one target language: ``target`` for the primary (first) one, else ``target_<code>``."""
    return "target" if language == primary else f"target_{language.lower()}"


class LaptSettings(StrictSettings):
    """What one LAPT run trains and how; the loop reads nothing else."""

    strategy: Strategy = Field(
        "full",
        description="Which parameters train: 'full' all; 'lora' LoRA on every linear layer plus embeddings and "
        "head; 'two-stage' embeddings and head first, then `second_stage`; '2x2-ls' the bottom two and top two "
        "layers plus embeddings and head ('0.01GB' §5); 'embeddings' only the embeddings and head (the body, and "
        "with it what the source model can do, stays as it was: new tokens learn to be read and written); 'new-head' "
        "only the LM-head rows an expansion added (init.mode expand), fitted on the frozen model's hidden states over "
        "the token budget, `head_fit_passes` times (objective clm; learning_rate about 1e-2; `head_fit_untie` "
        "gives a tied head its own rows first): the model learns to write its new tokens, and nothing else changes (components/training/head_fit.py); "
        "'new-rows' only the input-embedding and LM-head rows an expansion added (init.mode expand), trained in the "
        "loop by the objective (clm, distill or clm+distill; not ZeRO-3): the source rows and the body stay byte "
        "for byte, the optimizer holds only the new rows, and on source-language text the source model's logits "
        "over its own vocabulary are unchanged, its probabilities moving only by the new entries' share of the "
        "softmax (components/training/strategies.py, NewRows).",
    )
    objective: Objective = Field(
        "clm", description="'clm' next-token loss; 'mtp' adds one extra head, initialised from the LM head, that "
        "predicts the token after next ('0.01GB' §5); 'distill' matches the likelihoods the source model (the "
        "teacher, frozen, with its own tokenizer, on the same text) gives to chunks of text both tokenizations "
        "cover (ALM, Minixhofer et al. 2025); 'clm+distill' and 'mtp+distill' add distill_weight x that loss."
    )
    distill_weight: float = Field(
        1.0, ge=0, description="Weight of the distillation loss next to the next-token loss ('clm+distill', "
        "'mtp+distill')."
    )
    distill_temperature: float = Field(
        100.0, gt=0, description="ALM's temperature: a power 1/T on each chunk's probability before the binary "
        "divergence (tokenkit's binarization_temp, 100)."
    )
    distill_threshold: float | None = Field(
        0.1, gt=0, lt=1, description="ALM's debiasing: chunks merge until the teacher gives a new word at least "
        "this probability, and each side adds its own probability of a word start after the group (tokenkit's "
        "merge_by_space_prob+append_space, 0.1); null: every chunk on its own, no debiasing."
    )
    teacher_max_length: int | None = Field(
        None, ge=8, description="Longest teacher row in tokens under distillation (the teacher's tokenizer may need "
        "more tokens than the student's for the same text; chunks past it are left out); null: no limit."
    )
    max_steps: int | None = Field(
        20, ge=0, description="Optimizer steps; with max_tokens, whichever ends first (0 and no max_tokens: no LAPT)."
    )
    max_tokens: int | None = Field(
        None, ge=1, description="Token budget over all workers (real tokens); with max_steps, whichever ends first."
    )
    batch_size: int = Field(4, ge=1, description="Packed sequences per micro-batch per worker.")
    grad_accumulation_steps: int = Field(1, ge=1, description="Micro-batches per optimizer step.")
    sequence_length: int = Field(128, ge=8, description="Tokens per packed sequence.")
    learning_rate: float = Field(2e-4, gt=0, description="Peak learning rate.")
    warmup_steps: int = Field(2, ge=0, description="Linear warm-up steps.")
    schedule: Literal["cosine", "constant"] = Field("cosine", description="Learning-rate schedule after warm-up.")
    min_lr_ratio: float = Field(0.1, ge=0, le=1, description="Cosine ends at learning_rate times this.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay (matrices only).")
    max_grad_norm: float | None = Field(1.0, gt=0, description="Clip the gradient norm to this (None: no "
                                       "clipping).")
    mixing: dict[str, float] = Field(
        default_factory=lambda: {"target": 0.75, "source": 0.25},
        description="Share of each language stream in the batches: 'target' and 'source'.",
    )
    stage_one_steps: int | None = Field(
        None, ge=1, description="two-stage: steps that train only embeddings and head (default: a tenth, at least 1)."
    )
    stage_one_learning_rate: float = Field(
        1e-3, gt=0, description="two-stage: learning rate of the embeddings-only stage ('Design choices' §3.2)."
    )
    second_stage: Literal["full", "lora"] = Field("full", description="two-stage: what trains after stage one.")
    head_fit_passes: int = Field(
        12, ge=1, description="new-head: passes over the hidden states of the token budget (each pass costs a "
        "positions x new-rows product, not a forward pass of the model)."
    )
    head_fit_after: bool = Field(
        False, description="After the LAPT steps of any strategy, also fit the new LM-head rows as 'new-head' does "
        "(init.mode expand; a fresh token budget of the same size, `head_fit_passes` passes at learning_rate "
        "`head_fit_learning_rate`): LAPT adapts the model to the text, the fit teaches it to write its new tokens."
    )
    head_fit_learning_rate: float | None = Field(
        None, gt=0, description="Learning rate of the head fit after LAPT (head_fit_after); null: learning_rate."
    )
    head_fit_tokens: int | None = Field(
        None, ge=1, description="Tokens (all workers) whose hidden states the head fit keeps (new-head, "
        "head_fit_after); null: the LAPT budget's. They are held in float32, tokens x hidden x 4 bytes (1M tokens of "
        "a 4,096-wide model: 16 GB), so cap it on a large budget."
    )
    head_fit_untie: bool = Field(
        False, description="new-head: give a tied model its own LM head before the fit, so the new input rows keep "
        "their initialisation (vocabulary x hidden more parameters, no more FLOPs per token)."
    )
    head_fit_validation_fraction: float = Field(
        0.1, ge=0, lt=1, description="new-head, head_fit_after: the share of the fit's sequences held out; the rows "
        "kept are those with the lowest held-out loss, the initial rows included (0: no check, the last rows are kept)."
    )
    head_fit_bf16: bool = Field(
        False, description="new-head, head_fit_after: run the fit's matrix products (the body's forward for the "
        "hidden states, the old rows' logits, the new rows' logits and gradients) under bf16 autocast, as "
        "mixed-precision training does; hidden states, log-sum-exps, losses, the rows and Adam stay float32. On a "
        "CPU with AMX or AVX-512 bf16 the products take a third to a quarter of the float32 time; on a CPU without "
        "them they can be slower."
    )
    lora_rank: int = Field(8, ge=1, description="LoRA rank (lora strategies).")
    lora_alpha: int = Field(16, ge=1, description="LoRA alpha (scale alpha / rank).")
    lora_dropout: float = Field(0.0, ge=0, lt=1, description="LoRA dropout.")
    log_every: int = Field(1, ge=1, description="Log loss and throughput every N steps.")
    eval_every: int = Field(0, ge=0, description="Held-out bits per byte every N steps (0: only at the end).")
    eval_max_length: int = Field(
        256, ge=16, description="Longest window, in tokens, scored at once in evaluation; in an experiment config it "
        "defaults to evaluation.max_length."
    )
    eval_batch_size: int = Field(
        8, ge=1, description="Windows per forward pass in evaluation; in an experiment config it defaults to "
        "evaluation.batch_size."
    )
    checkpoint_every: int = Field(
        0, ge=0, description="Checkpoint (weights, optimizer, scheduler, data position, RNG) every N steps; "
        "0: only the final model. A killed worker resumes from the last one."
    )
    seed: int = Field(
        0, ge=0, description="Seed of the data order and the LoRA initialisation; in an experiment config it defaults to "
        "the experiment's top-level seed."
    )
    peak_flops: float | None = Field(
        None, gt=0, description="Dense bf16 peak FLOP/s of one device for MFU; default: detected (H100 989e12), "
        "unknown on CPU."
    )
    compile: bool | str = Field(
        False, description="torch.compile each decoder layer (true: inductor, or a backend name). On one H100, "
        "Llama-3.2-1B-shaped LAPT under ZeRO-2 bf16 ran 1.25x (one micro-batch per step) and 1.27x (six) faster "
        "(BENCHMARKS.md); compiling costs up to a minute at the start, more on CPU."
    )

    @field_validator("compile", mode="before")
    @classmethod
    def _compile(cls, value: Any) -> Any:
        """'true' / 'false' as text (an MLflow parameter, an environment variable) are the switches, not backends."""
        words = {"true": True, "on": True, "yes": True, "false": False, "off": False, "no": False, "": False}
        return words.get(value.strip().lower(), value) if isinstance(value, str) else value

    @field_validator("mixing")
    @classmethod
    def _mixing(cls, mixing: dict[str, float]) -> dict[str, float]:
        unknown = [name for name in mixing if not is_stream(name)]
        if unknown:
            raise ValueError(f"unknown streams {sorted(unknown)}; use 'target' and 'source' (and 'target_<code>' "
                             "for each further language of target.languages)")
        if any(v < 0 for v in mixing.values()) or abs(sum(mixing.values()) - 1.0) > 1e-6:
            raise ValueError(f"shares must be non-negative and sum to 1, got {mixing}")
        return mixing

    @model_validator(mode="after")
    def _budget(self) -> LaptSettings:
        if not self.has_budget:
            raise ValueError("LAPT needs a budget: set max_steps or max_tokens to a positive number")
        return self

    @model_validator(mode="after")
    def _head_fit_is_consistent(self) -> LaptSettings:
        """Its own validator, so the config's ``lapt`` section, which overrides ``_budget`` (no budget there means
        LAPT is skipped), keeps these checks."""
        if self.head_fit_after and self.strategy == "new-head":
            raise ValueError("head_fit_after fits the new head rows after the LAPT steps; strategy 'new-head' "
                             "already does only that: set one of them")
        if self.strategy == "new-head" and self.objective != "clm":
            raise ValueError(f"strategy 'new-head' fits the new head rows with the next-token loss only; objective "
                             f"{self.objective!r} needs a trained body: set objective clm, or another strategy")
        if self.strategy == "new-rows" and "mtp" in self.objective_terms:
            raise ValueError(f"strategy 'new-rows' trains only the new embedding and head rows, and objective "
                             f"{self.objective!r} also trains a whole extra head: set objective clm, distill or "
                             "clm+distill, or another strategy")
        return self

    @property
    def objective_terms(self) -> frozenset[str]:
        """The objective's terms (``clm+distill``: clm and distill), parsed by the one parser the loss uses."""
        from vocadapt.components.training.objectives import objective_terms

        return objective_terms(self.objective)

    @property
    def distills(self) -> bool:
        """Whether a teacher takes part (the objective has a 'distill' term)."""
        return "distill" in self.objective_terms

    @property
    def has_budget(self) -> bool:
        return bool(self.max_steps or self.max_tokens)

    @property
    def compile_backend(self) -> str | None:
        """The torch.compile backend for the decoder layers, or None (eager)."""
        if self.compile is True:
            return "inductor"
        return self.compile or None

    @property
    def tokens_per_micro_batch(self) -> int:
        return self.batch_size * self.sequence_length

    def total_steps(self, world_size: int = 1) -> int:
        """Optimizer steps: max_steps, or the steps max_tokens buys over all workers, whichever is fewer."""
        budgets = []
        if self.max_steps:
            budgets.append(self.max_steps)
        if self.max_tokens:
            per_step = self.tokens_per_micro_batch * self.grad_accumulation_steps * world_size
            budgets.append(max(1, -(-self.max_tokens // per_step)))
        return min(budgets)
