"""Gradient accumulation under DDP: two gloo processes, two micro-batches per optimizer step.

DDP all-reduces gradients in every backward unless it runs in ``no_sync``; the loop must reduce once per optimizer
step, on the last micro-batch of the window. A communication hook counts the all-reduces DDP really starts after
each micro-batch, and the result is compared with a run that reduces on every micro-batch (same gradients, more
traffic) and checked to be identical on both ranks. A two-stage run wraps the model in a new DDP per stage; the
stage-one wrapper must not reduce anything in stage two.
"""

from __future__ import annotations

import json
import socket
from contextlib import nullcontext

import pytest
import torch

from tests.training.lapt_tiny_world import ENGLISH, ITALIAN, make_model

pytestmark = pytest.mark.timeout(300)
ACCUMULATION, STEPS = 2, 2


def _worker(rank: int, world_size: int, port: int, folder: str) -> None:
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from transformers import AutoTokenizer

    from vocadapt.components.training import LaptData, LaptRuntime, LaptSettings, TorchEngine, train_lapt

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    data = LaptData({"target": ITALIAN * 2, "source": ENGLISH * 2})
    settings = LaptSettings(max_steps=STEPS, grad_accumulation_steps=ACCUMULATION, batch_size=2, sequence_length=16,
                            learning_rate=1e-2, warmup_steps=0, seed=0)
    report = {}
    for mode in ("no_sync", "always_sync", "two_stage"):
        reduces, after_micro_step = [0], []

        def counting_hook(state, bucket):
            reduces[0] += 1
            return allreduce_hook(state, bucket)

        def factory(module, params, spec):
            engine = TorchEngine(module, params, spec)
            engine.module.register_comm_hook(None, counting_hook)
            if mode == "always_sync":
                engine.micro_batch = nullcontext
            step = engine.step

            def counted_step():
                step()
                after_micro_step.append(reduces[0])

            engine.step = counted_step
            return engine

        run_settings = settings
        if mode == "two_stage":  # a new DDP per stage; the first one's reducer must not fire in the second
            run_settings = LaptSettings(**{**settings.model_dump(), "strategy": "two-stage", "stage_one_steps": 1})
        result = train_lapt(make_model(len(tokenizer)), tokenizer, data, run_settings,
                            runtime=LaptRuntime(engine_factory=factory))
        weights = torch.cat([p.detach().flatten() for p in result.model.parameters()])
        gathered = [torch.zeros_like(weights) for _ in range(world_size)]
        dist.all_gather(gathered, weights)
        report[mode] = {"reduces": after_micro_step, "losses": [loss for _, loss in result.series("loss")],
                        "replicas_equal": all(torch.equal(gathered[0], w) for w in gathered),
                        "weights": weights.tolist()}
    with open(f"{folder}/rank{rank}.json", "w", encoding="utf-8") as handle:
        json.dump(report, handle)
    dist.destroy_process_group()


def test_ddp_reduces_gradients_once_per_accumulation_window(tokenizer, tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    tokenizer.save_pretrained(tmp_path)
    torch.multiprocessing.spawn(_worker, args=(2, port, str(tmp_path)), nprocs=2, join=True)
    reports = [json.loads((tmp_path / f"rank{rank}.json").read_text(encoding="utf-8")) for rank in (0, 1)]
    for report in reports:
        quiet, chatty = report["no_sync"]["reduces"], report["always_sync"]["reduces"]
        buckets = quiet[ACCUMULATION - 1]
        assert buckets >= 1
        # all-reduces started by the end of each micro-batch: none before a window's last micro-batch
        assert quiet == [buckets * (i // ACCUMULATION) for i in range(1, ACCUMULATION * STEPS + 1)]
        assert chatty == [buckets * i for i in range(1, ACCUMULATION * STEPS + 1)]
        assert report["no_sync"]["replicas_equal"] and report["always_sync"]["replicas_equal"]
        stages = report["two_stage"]["reduces"]  # [stage one: quiet, reduce; stage two: quiet, reduce]
        assert stages[0] == 0 and stages[1] >= 1 and stages[2] == stages[1] and stages[3] > stages[2]
        assert report["two_stage"]["replicas_equal"]
        # reducing the accumulated sum once gives the gradients of reducing every micro-batch
        assert report["no_sync"]["losses"] == pytest.approx(report["always_sync"]["losses"], abs=1e-5)
        assert torch.allclose(torch.tensor(report["no_sync"]["weights"]),
                              torch.tensor(report["always_sync"]["weights"]), atol=1e-5)
