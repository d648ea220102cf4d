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
