"""Generation backends: greedy continuations of prompts, timed, with the generated token ids.

- :class:`TransformersBackend` runs ``model.generate`` in this process (fast tests, small models);
- :class:`VllmBackend` talks to a vLLM OpenAI-compatible server over HTTP (``serving.VllmServer`` starts one from
  its own environment).

Both stop at the end of the line (the prompts put one answer per line), decode greedily, and return a
``GenerationRecord`` whose token ids exclude the prompt and padding (pad tokens are not tokens: counting them
would inflate tokens per second).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol

from vocadapt.components.evaluation.efficiency import GenerationRecord
from vocadapt.components.evaluation.prompts import STOP


class GenerationBackend(Protocol):
    name: str

    def generate(self, prompts: Sequence[str], *, max_new_tokens: int) -> GenerationRecord:
        """Greedy continuation of every prompt, stopping at a newline or after ``max_new_tokens`` tokens."""
        ...


class TransformersBackend:
    """``model.generate`` with left padding, batches of ``batch_size`` prompts, stop string ``\\n``."""

    name = "transformers"

    def __init__(self, model, tokenizer, *, batch_size: int = 8) -> None:
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size

    def generate(self, prompts: Sequence[str], *, max_new_tokens: int) -> GenerationRecord:
        import torch
        from tqdm.auto import tqdm
        from transformers import StoppingCriteriaList

        tokenizer = self.tokenizer
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        texts, token_ids = [], []
        self.model.eval()
        started = time.perf_counter()
        batches = range(0, len(prompts), self.batch_size)
        # a bar from two batches on: one batch of 8 prompts x 48 tokens already takes seconds on a CPU
        for start in tqdm(batches, desc="generate (transformers)", unit="batch", disable=len(batches) < 2):
            batch = list(prompts[start : start + self.batch_size])
            encoded = {name: tensor.to(self.model.device) for name, tensor in
                       left_padded(tokenizer, batch, pad_id).items()}
            with torch.no_grad():
                output = self.model.generate(
                    **encoded, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=pad_id,
                    stopping_criteria=StoppingCriteriaList([_LineEnd(tokenizer)]),
                )
            for row in output[:, encoded["input_ids"].shape[1] :].tolist():
                ids = _until_stop(row, tokenizer, pad_id)
                token_ids.append(ids)
                texts.append(tokenizer.decode(ids, skip_special_tokens=True).split(STOP, 1)[0])
        return GenerationRecord(texts, token_ids, time.perf_counter() - started)


def left_padded(tokenizer, prompts: list[str], pad_id: int):
    """The prompts tokenized (no special tokens) and left-padded with ``pad_id`` to the longest: ``input_ids`` and
    ``attention_mask`` (CPU tensors)."""
    import torch

    rows = [tokenizer(prompt, add_special_tokens=False)["input_ids"] for prompt in prompts]
    width = max(len(row) for row in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        input_ids[i, width - len(row) :] = torch.tensor(row)
        attention[i, width - len(row) :] = 1
    return {"input_ids": input_ids, "attention_mask": attention}


class _LineEnd:
    """A row is done once its newest token's text holds ``STOP`` (one character: the token that completes it holds
    it whole), the rule :func:`_until_stop` cuts by. transformers' ``stop_strings`` does the same by first embedding
    every token of the vocabulary, again for each new tokenizer: seconds for a 128k-262k vocabulary, for the few
    tokens a side-by-side answer has."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        done = [STOP in self.tokenizer.decode([token]) for token in input_ids[:, -1].tolist()]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


def _until_stop(row: list[int], tokenizer, pad_id: int) -> list[int]:
    """Generated ids up to and including the token that completed the stop string or EOS; padding dropped."""
    ids: list[int] = []
    text = ""
    for token in row:
        if token == pad_id and token != tokenizer.eos_token_id:
            break
        ids.append(token)
        if token == tokenizer.eos_token_id:
            break
        text = tokenizer.decode(ids)
        if STOP in text:
            break
    return ids


class VllmBackend:
    """The OpenAI completions endpoint of a vLLM server: ``temperature=0``, stop ``\\n``, one request per prompt
    list. Token ids come back with ``return_tokens_as_token_ids`` (vLLM's extension), so %Gen counts the ids the
    server actually generated rather than a re-tokenization of the text."""

    name = "vllm"

    def __init__(self, base_url: str, model: str, *, timeout_s: float = 600.0) -> None:
        self.base_url, self.model, self.timeout_s = base_url.rstrip("/"), model, timeout_s

    def generate(self, prompts: Sequence[str], *, max_new_tokens: int) -> GenerationRecord:
        import requests

        payload = {
            "model": self.model, "prompt": list(prompts), "max_tokens": max_new_tokens, "temperature": 0.0,
            "stop": [STOP], "logprobs": 0, "return_tokens_as_token_ids": True, "seed": 0,
        }
        started = time.perf_counter()
        response = requests.post(f"{self.base_url}/v1/completions", json=payload, timeout=self.timeout_s)
        seconds = time.perf_counter() - started
        if response.status_code != 200:
            raise RuntimeError(f"vLLM server answered {response.status_code}: {response.text[:500]}")
        choices = sorted(response.json()["choices"], key=lambda choice: choice["index"])
        texts = [choice["text"] for choice in choices]
        token_ids = [_token_ids(choice) for choice in choices]
        return GenerationRecord(texts, token_ids, seconds)


def _token_ids(choice: dict) -> list[int]:
    """``token_id:123`` strings of the logprobs block -> ints."""
    tokens = (choice.get("logprobs") or {}).get("tokens") or []
    ids = []
    for token in tokens:
        if not token.startswith("token_id:"):
            raise RuntimeError(f"the vLLM server did not return token ids (got {token!r}): it needs "
                               "return_tokens_as_token_ids support (vLLM >= 0.6)")
        ids.append(int(token.split(":", 1)[1]))
    return ids
