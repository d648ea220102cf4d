"""Where adapt scores its models (``evaluation.device``): resolved once, each model moved there for the block that
scores it and back to the CPU after, even when the scoring fails. No GPU here: the move is checked on a stand-in
that records it (the scoring components send their inputs to the model's own device)."""

from __future__ import annotations

import pytest

from vocadapt.pipelines.vocabulary_steps import on_scoring_device, scoring_device
from vocadapt.platform.config import ExperimentConfig


class RecordedModel:
    def __init__(self) -> None:
        self.moves: list[str] = []

    def to(self, device):
        self.moves.append(str(device))
        return self


def _config(device: str) -> ExperimentConfig:
    return ExperimentConfig.model_validate({"target": {"language": "it"}, "evaluation": {"device": device}})


@pytest.mark.parametrize(("setting", "cuda", "resolved"), [
    ("auto", False, "cpu"), ("auto", True, "cuda"), ("cpu", True, "cpu"), ("cuda", True, "cuda"),
])
def test_the_setting_resolves_to_a_device(monkeypatch, setting, cuda, resolved):
    monkeypatch.setattr("torch.cuda.is_available", lambda: cuda)
    assert scoring_device(_config(setting)) == resolved


def test_on_the_cpu_nothing_moves(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    model = RecordedModel()
    with on_scoring_device(_config("auto"), model):
        pass
    assert model.moves == []


def test_on_a_gpu_every_model_goes_there_and_comes_back_even_when_scoring_fails(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr("torch.cuda.empty_cache", lambda: None)
    adapted, source = RecordedModel(), RecordedModel()
    with on_scoring_device(_config("auto"), adapted, source):
        assert adapted.moves == source.moves == ["cuda"]
    assert adapted.moves == source.moves == ["cuda", "cpu"]
    with pytest.raises(RuntimeError), on_scoring_device(_config("cuda"), adapted):
        raise RuntimeError("a scoring error")
    assert adapted.moves == ["cuda", "cpu", "cuda", "cpu"]


def test_an_unknown_device_is_refused_by_the_config():
    from vocadapt.platform.config.lapt_sections import ConfigError

    with pytest.raises((ConfigError, ValueError)) as caught:
        _config("tpu")
    assert "evaluation.device" in str(caught.value) or "device" in str(caught.value)


class PlacedModel(RecordedModel):
    """A stand-in that knows where it is, as a transformers model does (``.device``)."""

    @property
    def device(self):
        import torch

        return torch.device(self.moves[-1] if self.moves else "cpu")


def test_a_nested_block_leaves_a_model_where_the_outer_block_put_it(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr("torch.cuda.empty_cache", lambda: None)
    model = PlacedModel()
    with on_scoring_device(_config("auto"), model):
        with on_scoring_device(_config("auto"), model):  # held_out_bits_per_byte inside an outer scoring block
            assert model.device.type == "cuda"
        assert model.device.type == "cuda"
    assert model.moves == ["cuda", "cpu"]
