"""The head fit's two phases after the body's forwards, with positions taken a few at a time on a CPU against the
whole chunk at once (as before), side by side in one process.

``fit_new_output_rows`` (``components/training/head_fit.py``) at the demo's head: 49,152 rows of 576, 5,000 of them
new (so 44,152 old rows), bf16 products as the demo's ``head_fit_bf16``. The body is one layer of SmolLM2's width
(the forwards are not what is compared). Each arm fits the same positions: first as before (the old rows'
log-sum-exp and every update over 4,096 positions at once: ``CPU_LOG_SUM_EXP_POSITIONS`` and
``CPU_UPDATE_POSITIONS`` set to the chunk), then as shipped. The figures are seconds per 4,096 positions of each
phase (from the fit's progress reports), the fitted rows' largest difference and the reported losses.

    python benchmarks/head_fit_speed.py [--forwards 16] [--repeat 2] [--float32]
"""

from __future__ import annotations

import argparse
import time

HIDDEN, ROWS, NEW_ROWS, SEQUENCE = 576, 49152, 5000, 512


def tiny_body_model(seed: int):
    """A one-layer Llama of SmolLM2-135M's width and vocabulary, tied, seeded."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=ROWS, hidden_size=HIDDEN, intermediate_size=1536, num_hidden_layers=1,
                         num_attention_heads=9, num_key_value_heads=3, tie_word_embeddings=True)
    return LlamaForCausalLM(config).eval()


def fit_once(forwards: int, bf16: bool, whole_chunks: bool):
    """One fit of ``forwards`` x 4,096 positions; (seconds per phase, the fitted new rows, the result)."""
    import torch

    from vocadapt.components.training import head_fit

    saved = head_fit.CPU_LOG_SUM_EXP_POSITIONS, head_fit.CPU_UPDATE_POSITIONS
    if whole_chunks:
        head_fit.CPU_LOG_SUM_EXP_POSITIONS = head_fit.CPU_UPDATE_POSITIONS = 4096
    model = tiny_body_model(0)
    generator = torch.Generator().manual_seed(1)
    per_forward = head_fit.FORWARD_TOKENS // SEQUENCE
    batches = [(torch.randint(0, ROWS, (per_forward, SEQUENCE), generator=generator),
                torch.ones(per_forward, SEQUENCE, dtype=torch.long)) for _ in range(forwards)]
    new_ids = list(range(ROWS - NEW_ROWS, ROWS))
    started: dict[str, float] = {}
    ended: dict[str, float] = {}

    def progress(phase: str, done: int, total: int) -> None:
        now = time.perf_counter()
        started.setdefault(phase, now)
        if done == total:
            ended[phase] = now

    settings = head_fit.HeadFitSettings(passes=1, learning_rate=1e-3, validation_fraction=0, bf16=bf16)
    try:
        result = head_fit.fit_new_output_rows(model, batches, new_ids, settings, progress=progress)
    finally:
        head_fit.CPU_LOG_SUM_EXP_POSITIONS, head_fit.CPU_UPDATE_POSITIONS = saved
    seconds = {phase: ended[phase] - started[phase] for phase in started}
    return seconds, model.get_output_embeddings().weight.detach()[new_ids].float().clone(), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--forwards", type=int, default=16, help="forwards of 4,096 positions (the demo: 80)")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each arm, alternating")
    parser.add_argument("--float32", action="store_true", help="float32 products (head_fit_bf16: false)")
    arguments = parser.parse_args()
    import torch

    from vocadapt.components.training import head_fit

    bf16 = not arguments.float32
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; head {ROWS} x {HIDDEN}, {NEW_ROWS} new rows, "
          f"{arguments.forwards} x 4,096 positions, {'bf16' if bf16 else 'float32'} products; "
          f"shipped: {head_fit.CPU_LOG_SUM_EXP_POSITIONS} positions at once for the log-sum-exp, "
          f"{head_fit.CPU_UPDATE_POSITIONS} for an update")
    arms = {"whole chunk (before)": True, "blocks (shipped)": False}
    timings: dict[str, list[dict[str, float]]] = {name: [] for name in arms}
    rows, results = {}, {}
    for _ in range(arguments.repeat):
        for name, whole in arms.items():
            seconds, rows[name], results[name] = fit_once(arguments.forwards, bf16, whole)
            timings[name].append(seconds)
    chunks = arguments.forwards
    print(f"{'arm':<22} {'old rows logits s/4096':>24} {'update s/4096':>15} {'loss after':>12}")
    for name in arms:
        lse = min(t["old rows' logits"] for t in timings[name]) / chunks
        updates = min(t["updates"] for t in timings[name]) / max(1, results[name].updates)
        print(f"{name:<22} {lse:>24.3f} {updates:>15.3f} {results[name].loss_after:>12.6f}")
    before, after = rows["whole chunk (before)"], rows["blocks (shipped)"]
    print(f"fitted rows: largest difference {float((before - after).abs().max()):.3g} "
          f"(largest row value {float(before.abs().max()):.3g}); loss before the fit "
          f"{results['whole chunk (before)'].loss_before:.6f} / {results['blocks (shipped)'].loss_before:.6f} "
          "(the old rows' log-sum-exp enters it)")


if __name__ == "__main__":
    main()
