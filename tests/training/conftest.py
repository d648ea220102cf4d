"""Fixtures for the training and metrics tests (helpers in lapt_tiny_world.py)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.training.lapt_tiny_world import make_model, make_tokenizer  # noqa: E402


@pytest.fixture(scope="session")
def tokenizer():
    return make_tokenizer()


@pytest.fixture()
def tiny_model(tokenizer):
    return make_model(len(tokenizer))


@pytest.fixture(scope="session")
def gloo_process_group():
    """One single-rank gloo process group for every CPU DeepSpeed test of the session. DeepSpeed caches the groups
    it derives from the first one, so a group destroyed and made again between test modules breaks the next
    engine ("Group ... is not registered"): it is made once and destroyed at the end of the session."""
    import torch

    from vocadapt.platform.lapt.deepspeed_config import init_single_process

    already = torch.distributed.is_initialized()
    if not already:
        init_single_process("gloo")
    yield
    if not already and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
