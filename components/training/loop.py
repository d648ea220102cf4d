"""The LAPT loop: one process, no Ray, so it can be benchmarked and debugged anywhere.

``vocadapt.platform.lapt.ray_train`` runs this same function inside Ray Train workers; under ``torch.distributed`` each
rank reads its own data shard and the engine (plain torch DDP, or DeepSpeed through ``engine_factory``) keeps the
replicas in step. Metrics are logged on rank 0 only; throughput counts real tokens over all ranks.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from vocadapt.components.metric_logging import MetricLogger, NullLogger
from vocadapt.components.metrics.bits_per_byte import bits_per_byte
from vocadapt.components.training.data import LaptData, PackedMixture, Worker
from vocadapt.components.training.head_fit import HeadFitSettings, fit_new_output_rows, new_token_ids_of
from vocadapt.components.training.engine import EngineFactory, EngineSpec, TorchEngine
from vocadapt.components.training.mtp import MultiTokenPrediction
from vocadapt.components.training.objectives import Distillation, LaptObjective
from vocadapt.components.training.settings import LaptSettings
from vocadapt.components.training.strategies import (
    NewRows, Stage, add_lora, count_parameters, merge_lora, plan_stages, set_trainable, uses_lora)
from vocadapt.components.training.throughput import (
    compile_decoder_layers, detect_peak_flops, forward_flops_per_token, training_flops)

CheckpointHook = Callable[[int, Callable[[Path], None], dict], None]


@dataclass
class LaptResult:
    model: nn.Module  # the trained causal LM: LoRA merged in, MTP head dropped
    history: list[tuple[int, dict[str, float]]]  # (optimizer step, metrics) as logged
    steps: int
    tokens: int  # real tokens trained on, all workers
    trainable_parameters: dict[str, int]  # per stage kind

    def series(self, name: str) -> list[tuple[int, float]]:
        return [(step, metrics[name]) for step, metrics in self.history if name in metrics]


@dataclass
class _Run:
    """Everything one call of train_lapt carries between steps."""

    settings: LaptSettings
    lm: nn.Module
    module: nn.Module
    tokenizer: object
    mixture: PackedMixture
    logger: MetricLogger
    rank: int
    world_size: int
    eval_documents: dict[str, list[str]]
    checkpoint_hook: CheckpointHook | None
    step_hook: Callable[[int, dict], None] | None
    total_steps: int
    objective: LaptObjective
    peak_flops: float | None
    flops_per_token: float = 0.0  # the student's training FLOPs per token in the current stage
    teacher_flops_per_token: float = 0.0  # the teacher's forward FLOPs per teacher token (distillation)
    step: int = 0
    tokens: int = 0
    stage_index: int = 0
    history: list = field(default_factory=list)
    trainable: dict = field(default_factory=dict)
    phase_hook: Callable[[str, int, int], None] | None = None
    engine_factory: EngineFactory | None = None  # builds each stage's optimizer engine (TorchEngine unless given)


@dataclass(frozen=True)
class LaptHooks:
    """What a LAPT run reports to as it goes. The logger hears rank 0 only; the hooks run on every rank."""

    logger: MetricLogger | None = None  # None: metrics go nowhere
    # on_checkpoint(step, write, metrics), every ``checkpoint_every`` steps: ``write(directory)`` saves weights,
    # optimizer, scheduler, data position and RNG there
    on_checkpoint: CheckpointHook | None = None
    on_step: Callable[[int, dict], None] | None = None  # (step, metrics) after every optimizer step: progress, faults
    # (phase, done, total) for the steps that are not optimizer steps: the head fit's forwards and updates
    on_phase: Callable[[str, int, int], None] | None = None


@dataclass(frozen=True)
class LaptRuntime:
    """What a LAPT run is handed besides the model, its text and its settings: what the calling process loads or
    chooses at run time, which a config section cannot hold."""

    eval_documents: dict[str, list[str]] | None = None  # held-out documents per stream, scored during and after
    distillation: Distillation | None = None  # the teacher, for objectives with a 'distill' term
    engine_factory: EngineFactory | None = None  # builds each stage's optimizer engine (None: TorchEngine)
    resume_state: str | Path | None = None  # a directory ``LaptHooks.on_checkpoint``'s write filled: continue after it


def train_lapt(model: nn.Module, tokenizer, data: LaptData, settings: LaptSettings | dict, *,
               hooks: LaptHooks = LaptHooks(), runtime: LaptRuntime = LaptRuntime()) -> LaptResult:
    """Continue pre-training ``model`` on the mixed, packed ``data``; see the package docstring for the rest.

    settings: LaptSettings (the config's ``lapt`` section is one), or a mapping of its fields, validated (unknown
    keys refused).
    """
    distillation = runtime.distillation
    if not isinstance(settings, LaptSettings):
        settings = LaptSettings.model_validate(settings)
    rank, world_size = _topology()
    torch.manual_seed(settings.seed)  # LoRA initialisation is random; every rank must draw the same
    lm = add_lora(model, settings) if uses_lora(settings) else model
    if settings.compile_backend:
        compile_decoder_layers(lm, settings.compile_backend)
    module = MultiTokenPrediction(lm) if "mtp" in settings.objective_terms else lm
    if distillation is not None:
        distillation.to(next(lm.parameters()).device)
    objective = LaptObjective(settings.objective, distillation=distillation, distill_weight=settings.distill_weight)
    run = _Run(settings, lm, module, tokenizer,
               PackedMixture(data, tokenizer, mixing=settings.mixing, sequence_length=settings.sequence_length,
                             seed=settings.seed, worker=Worker(rank, world_size)),
               hooks.logger or NullLogger(), rank, world_size, runtime.eval_documents or {}, hooks.on_checkpoint,
               hooks.on_step, settings.total_steps(world_size), objective, settings.peak_flops or detect_peak_flops())
    if distillation is not None:
        teacher_length = settings.teacher_max_length or settings.sequence_length
        run.teacher_flops_per_token = forward_flops_per_token(distillation.teacher, teacher_length)
    run.phase_hook, run.engine_factory = hooks.on_phase, runtime.engine_factory or TorchEngine
    if settings.strategy == "new-head":  # no optimizer steps over the model: nothing to resume, a fit is minutes
        _fit_new_head(run, settings.learning_rate)
        return LaptResult(lm, run.history, run.step, run.tokens, run.trainable)
    resume_state = Path(runtime.resume_state) if runtime.resume_state else None
    if resume_state:
        _load_loop_state(run, resume_state)
    stages, start = plan_stages(settings, run.total_steps), 0
    for index, stage in enumerate(stages):
        end = start + stage.steps
        if index >= run.stage_index:
            _run_stage(run, index, stage, end, resume_state if index == run.stage_index else None)
        start = end
    trained = merge_lora(lm)
    if settings.head_fit_after:  # once, after the last optimizer step (a resumed run reaches it again)
        run.lm = trained
        _fit_new_head(run, settings.head_fit_learning_rate or settings.learning_rate)
    return LaptResult(trained, run.history, run.step, run.tokens, run.trainable)


def _topology() -> tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def _run_stage(run: _Run, index: int, stage: Stage, end: int, resume_from: Path | None) -> None:
    """Stage ``index`` trained until step ``end``, resumed from ``resume_from`` when given."""
    new_rows = NewRows.install(run.lm, _expansion_ids(run.lm)) if stage.kind == "new-rows" else None
    try:
        _train_stage(run, index, stage, end, resume_from, new_rows)
    finally:  # the trained rows go into the matrices, and the model has its usual layout again
        if new_rows is not None:
            new_rows.write_back()


def _expansion_ids(lm: nn.Module) -> list[int]:
    """Strategy ``new-rows``: the ids the expansion added, from the surgery's record."""
    try:
        return new_token_ids_of(lm)
    except ValueError:
        raise ValueError("strategy 'new-rows' trains the rows an expansion added, and this model has no record of "
                         "an expansion (config.vocadapt_init with mode 'expand' and new_id_ranges); adapt it with "
                         "init.mode expand, or use strategy 'embeddings' or 'full'") from None


def _train_stage(run: _Run, index: int, stage: Stage, end: int, resume_from: Path | None,
                 new_rows: NewRows | None) -> None:
    extra = list(run.module.extra_head.parameters()) if isinstance(run.module, MultiTokenPrediction) else []
    params = set_trainable(run.lm, stage.kind, extra)
    run.trainable[stage.kind] = count_parameters(params)
    # frozen matrices cost 4 FLOPs per parameter and token, trained ones 6: the count follows the stage
    extra_heads = [run.module.extra_head] if isinstance(run.module, MultiTokenPrediction) else []
    run.flops_per_token = training_flops(run.lm, run.settings.sequence_length, extra_heads).per_token
    spec = EngineSpec(stage.learning_rate, stage.warmup_steps, stage.steps, stage.schedule,
                      run.settings.min_lr_ratio, run.settings.weight_decay, run.settings.max_grad_norm,
                      run.settings.grad_accumulation_steps)
    engine = run.engine_factory(run.module, params, spec)
    if new_rows is not None and getattr(engine, "forward_needs_all_ranks", False):
        engine.close()
        new_rows.write_back(keep_rows=False)  # the matrices are partitioned now: nothing can be written into them
        raise ValueError("strategy 'new-rows' writes the trained rows back into the embedding and head matrices, "
                         "which ZeRO-3 partitions across ranks; use deepspeed.zero_stage 1 or 2 (the optimizer "
                         "state is only the new rows anyway)")
    if resume_from is not None:
        engine.load(resume_from)
    run.stage_index = index
    run.module.train()
    while run.step < end:
        metrics = _train_step(run, engine, stage)
        run.step += 1
        last = run.step == run.total_steps
        evaluate = bool(run.settings.eval_every and run.step % run.settings.eval_every == 0 or last)
        # ZeRO-3 gathers parameters in every forward, so all ranks evaluate; otherwise rank 0 alone does
        if evaluate and (run.rank == 0 or getattr(engine, "forward_needs_all_ranks", False)):
            metrics.update(_evaluate(run))
        if run.step % run.settings.log_every == 0 or last or evaluate:
            run.history.append((run.step, metrics))
            if run.rank == 0:
                run.logger.log_metrics(metrics, step=run.step)
        if run.step_hook:
            run.step_hook(run.step, metrics)
        if run.checkpoint_hook and run.settings.checkpoint_every and run.step % run.settings.checkpoint_every == 0:
            run.checkpoint_hook(run.step, lambda directory: _write_checkpoint(run, engine, Path(directory)), metrics)
    engine.close()


def _head_fit_progress(phase_hook: Callable[[str, int, int], None] | None):
    """The head fit's progress as phases named for the console (``head fit: hidden states``), or None."""
    if phase_hook is None:
        return None
    return lambda phase, done, total: phase_hook(f"head fit: {phase}", done, total)


def _fit_new_head(run: _Run, learning_rate: float) -> None:
    """Strategy ``new-head`` (and ``head_fit_after``): the token budget's next packed batches, their hidden states
    once, the new head rows fitted ``head_fit_passes`` times over them (``head_fit.py``); logged as one more step."""
    settings, started = run.settings, time.perf_counter()
    after_lapt = settings.strategy != "new-head"
    new_ids = new_token_ids_of(run.lm)
    count = run.total_steps * settings.grad_accumulation_steps
    if settings.head_fit_tokens:
        count = max(1, -(-settings.head_fit_tokens // (settings.tokens_per_micro_batch * run.world_size)))
    batches = [run.mixture.next_batch(settings.batch_size) for _ in range(count)]
    fit = HeadFitSettings(passes=settings.head_fit_passes, learning_rate=learning_rate, seed=settings.seed,
                          untie=settings.head_fit_untie, validation_fraction=settings.head_fit_validation_fraction,
                          bf16=settings.head_fit_bf16)
    result = fit_new_output_rows(run.lm, [(b.input_ids, b.attention_mask) for b in batches], new_ids, fit,
                                 progress=_head_fit_progress(run.phase_hook))
    seconds = time.perf_counter() - started
    fitted = int(sum(b.real_tokens for b in batches)) * run.world_size  # every rank packs the same count
    run.step = run.step + 1 if after_lapt else run.total_steps  # after LAPT: one step past the last optimizer step
    run.tokens += fitted
    run.trainable["new-head"] = result.rows * run.lm.get_output_embeddings().weight.shape[1]
    metrics = {"loss": result.loss_after, **result.metrics(), "tokens": float(run.tokens),
               "tokens_per_second": fitted / seconds, "learning_rate": learning_rate,
               "stage": float(run.stage_index + after_lapt)}
    metrics.update(_evaluate(run))
    run.history.append((run.step, metrics))
    if run.rank == 0:
        run.logger.log_metrics(metrics, step=run.step)
    if run.step_hook:
        run.step_hook(run.step, metrics)


def _train_step(run: _Run, engine, stage: Stage) -> dict[str, float]:
    """One optimizer step over grad_accumulation_steps micro-batches. Returns this step's metrics.

    ``loss`` is the next-token loss whatever the objective, so curves stay comparable across objectives; the loss
    that was back-propagated is ``objective_loss``, and each term is logged on its own (``distill_loss``, ...).
    """
    settings, started = run.settings, time.perf_counter()
    sums: dict[str, torch.Tensor] = {}  # each term summed over micro-batches, kept on the device: no sync per batch
    stream_tokens = {name: 0 for name in run.mixture.names}
    teacher_tokens = 0
    for _ in range(settings.grad_accumulation_steps):
        batch = run.mixture.next_batch(settings.batch_size)
        device = next(run.module.parameters()).device
        with engine.micro_batch():  # DDP: no gradient all-reduce before the window's last micro-batch
            # a training forward never builds a KV cache (memory, and under torch.compile its per-layer state made
            # every decoder layer recompile until dynamo's limit left most of them eager): the objective passes
            # use_cache=False; its losses never hold the batch x length x vocabulary logits of the next batch
            out = run.objective(engine.module, batch.input_ids.to(device), batch.attention_mask.to(device))
            engine.backward(out.loss)
        engine.step()
        terms = {"objective_loss": out.loss.detach().float(), **out.terms}
        for name, value in terms.items():
            sums[name] = value if name not in sums else sums[name] + value
        teacher_tokens += out.teacher_tokens
        del out
        for name, row in zip(batch.streams, batch.attention_mask):
            stream_tokens[name] += int(row.sum())  # real tokens only: padding would be zeros here
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    names = sorted(sums)
    counts = torch.tensor([*(float(sums[name]) for name in names), float(teacher_tokens),
                           settings.grad_accumulation_steps, *stream_tokens.values()], dtype=torch.float64)
    if run.world_size > 1:  # every rank's tokens count; the losses are the means over ranks
        torch.distributed.all_reduce(counts)
    terms = dict(zip(names, counts[: len(names)].tolist()))
    teacher_total, micro_batches = float(counts[len(names)]), float(counts[len(names) + 1])
    stream_counts = counts[len(names) + 2:]
    real_tokens = int(stream_counts.sum())
    run.tokens += real_tokens
    per_device = real_tokens / seconds / run.world_size
    metrics = {"loss": terms.pop("next_token_loss") / micro_batches, "learning_rate": engine.learning_rate(),
               "tokens_per_second": real_tokens / seconds, "tokens_per_second_per_device": per_device,
               "tokens": float(run.tokens), "stage": float(run.stage_index)}
    metrics.update({name: value / micro_batches for name, value in terms.items()})
    metrics.update({f"token_share_{name}": float(c / real_tokens) for name, c in zip(stream_tokens, stream_counts)})
    if teacher_total:
        metrics["teacher_tokens_per_second"] = teacher_total / seconds
    if run.peak_flops:
        metrics["mfu"] = run.flops_per_token * per_device / run.peak_flops
        if teacher_total:  # the teacher's forward passes, reported apart from the student's training
            teacher = run.teacher_flops_per_token * teacher_total / seconds / run.world_size / run.peak_flops
            metrics["mfu_teacher"] = teacher
            metrics["mfu_with_teacher"] = metrics["mfu"] + teacher
    return metrics


def _evaluate(run: _Run) -> dict[str, float]:
    """Held-out bits per byte per stream."""
    settings = run.settings
    scores = {f"bits_per_byte_{name}": bits_per_byte(run.lm, run.tokenizer, docs, max_length=settings.eval_max_length,
                                                     batch_size=settings.eval_batch_size)
              for name, docs in run.eval_documents.items() if docs}
    run.module.train()
    return scores


def _write_checkpoint(run: _Run, engine, directory: Path) -> None:
    """Weights and optimizer through the engine; this rank's loop state, data position and RNG beside them."""
    directory.mkdir(parents=True, exist_ok=True)
    engine.save(directory, run.rank)
    state = {"step": run.step, "tokens": run.tokens, "stage_index": run.stage_index,
             "history": run.history if run.rank == 0 else [], "trainable": run.trainable,
             "data": run.mixture.state_dict(), "python_random": random.getstate()[1][:625]}
    (directory / f"loop_state_rank{run.rank}.json").write_text(json.dumps(state), encoding="utf-8")
    rng = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state()
    torch.save(rng, directory / f"rng_rank{run.rank}.pt")


def _load_loop_state(run: _Run, directory: Path) -> None:
    state_file = directory / f"loop_state_rank{run.rank}.json"
    if not state_file.is_file():
        raise FileNotFoundError(f"{directory} holds no loop state for worker {run.rank}; resume from a checkpoint "
                                "this run wrote, with the same number of workers")
    state = json.loads(state_file.read_text(encoding="utf-8"))
    run.step, run.tokens, run.stage_index = state["step"], state["tokens"], state["stage_index"]
    run.trainable = state["trainable"]
    run.history = [(step, metrics) for step, metrics in state["history"]]
    run.mixture.load_state_dict(state["data"])
    random.setstate((3, tuple(state["python_random"]), None))
    rng = torch.load(directory / f"rng_rank{run.rank}.pt", weights_only=True)
    torch.set_rng_state(rng["torch"])
    if "cuda" in rng and torch.cuda.is_available():
        torch.cuda.set_rng_state(rng["cuda"])
