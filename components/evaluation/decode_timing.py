"""Equal-content decoding speed: the time to decode the same text token by token with a KV cache, teacher-forced.

Generation speed-ups from free-running generation compare different texts (each model writes its own), so a
model that rambles in short tokens and one that stops early are not comparable. Here both models decode the *same*
reference text, one token per forward pass with the KV cache, as they would when generating it, but fed the true
tokens (teacher forcing): what differs is only how many steps each tokenizer needs for that text and how long a
step takes. Batch 1, the latency case. The models take turns, ``repeats`` times, and the median of each counts, so
a burst of load on a shared machine hits both.

The speed-up is ``source seconds / adapted seconds``; with equal step times it equals the token ratio, so the two
are printed side by side.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence

import torch


def decode_seconds(model, token_ids: Sequence[int]) -> float:
    """Wall time of feeding ``token_ids`` one at a time through ``model`` with its KV cache (batch 1)."""
    device = next(model.parameters()).device
    ids = torch.tensor([list(token_ids)], dtype=torch.long, device=device)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            started = time.perf_counter()
            past = None
            for position in range(ids.shape[1]):
                output = model(input_ids=ids[:, position:position + 1], past_key_values=past, use_cache=True)
                past = output.past_key_values
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            return time.perf_counter() - started
    finally:
        model.train(was_training)


def equal_content_timing(contenders: Mapping[str, tuple[object, object]], text: str, *, repeats: int = 5,
                         warmup_tokens: int = 8) -> dict[str, dict[str, float]]:
    """Per contender (name -> (model, tokenizer)): ``tokens`` of ``text`` and the median ``seconds`` to decode them.

    Each model is warmed up on its first ``warmup_tokens`` tokens, then the contenders take turns ``repeats``
    times on the whole text."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    encoded = {}
    for name, (model, tokenizer) in contenders.items():
        start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        encoded[name] = [start, *tokenizer(text, add_special_tokens=False)["input_ids"]]
        decode_seconds(model, encoded[name][:warmup_tokens])
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, (model, _) in contenders.items():
            times[name].append(decode_seconds(model, encoded[name]))
    return {name: {"tokens": float(len(encoded[name]) - 1), "seconds": statistics.median(times[name])}
            for name in contenders}


def equal_content_speed_up(adapted: Mapping[str, float], source: Mapping[str, float]) -> dict[str, float]:
    """``speed_up``: source seconds over adapted seconds; ``token_ratio``: source tokens over adapted tokens."""
    return {"speed_up": source["seconds"] / adapted["seconds"], "token_ratio": source["tokens"] / adapted["tokens"]}


def compare_on_documents(adapted: tuple[object, object], source: tuple[object, object], documents: Sequence[str], *,
                         characters: int, repeats: int) -> dict[str, float]:
    """``equal_content_speed_up`` of the (model, tokenizer) pairs ``adapted`` and ``source`` on the first
    ``characters`` characters of ``documents`` joined by spaces; {} when ``characters`` is 0 or there is no text."""
    text = " ".join(line.strip() for line in documents if line.strip())[:characters]
    if not characters or not text:
        return {}
    timing = equal_content_timing({"source": source, "adapted": adapted}, text, repeats=repeats)
    return equal_content_speed_up(timing["adapted"], timing["source"])
