"""A tiny trainable standing in for the adapt pipeline in sweep tests: a byte-unigram language model trained by
full-batch gradient descent, scored in bits per byte on held-out text. Seconds, numpy only; the checkpoint a trial
leaves is the registry tests' tiny Llama (the best trial's is registered, and registration checks that it serves).

Methods: ``fvt`` starts uniform (8 bits per byte), ``random`` starts from wide random logits (far worse), ``broken``
always raises, ``flaky`` raises while the file FAIL_FLAKY exists in the sweep folder (for the resume test),
``interrupt`` sends SIGINT (Ctrl-C) to the process id written in INTERRUPT_DRIVER there, then waits to be stopped.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np

from tests.registry.tiny_registry_world import build_tiny_model
from vocadapt.platform.sweeps.tune import METRIC, TrialOutcome

TRAIN = ("La città di Roma è la capitale d'Italia. Il gatto dorme sul divano mentre fuori piove. " * 20).encode()
HELD_OUT = "Domani andremo al mercato per comprare la frutta e la verdura fresca.".encode()


def _bits_per_byte(logits: np.ndarray, data: bytes) -> float:
    log_probs = logits - np.logaddexp.reduce(logits)
    return float(-log_probs[np.frombuffer(data, dtype=np.uint8)].mean() / np.log(2))


def tiny_objective(config, trial) -> TrialOutcome:
    method = config.init.methods[0]
    sweep_folder = Path(config.output_dir).parent
    if method == "broken" or (method == "flaky" and (sweep_folder / "FAIL_FLAKY").exists()):
        raise RuntimeError(f"initialiser {method!r} failed on purpose")
    if method == "interrupt" and (sweep_folder / "INTERRUPT_DRIVER").exists():
        os.kill(int((sweep_folder / "INTERRUPT_DRIVER").read_text()), signal.SIGINT)
        for _ in range(600):  # the driver stops this trial; the loop only bounds a driver that does not
            time.sleep(0.1)
        raise RuntimeError("the driver did not stop the sweep on SIGINT")
    rng = np.random.default_rng(config.seed)
    logits = rng.normal(0.0, 6.0, 256) if method == "random" else np.zeros(256)
    counts = np.bincount(np.frombuffer(TRAIN, dtype=np.uint8), minlength=256) / len(TRAIN)
    with trial.tracker.run(f"{config.name}/{method}", parent_run_id=trial.trial_run_id) as run:
        run_id = run.info.run_id
        for step in range(1, config.lapt.max_steps + 1):
            probs = np.exp(logits - np.logaddexp.reduce(logits))
            logits = logits - config.lapt.learning_rate * (probs - counts)
            bpb = _bits_per_byte(logits, HELD_OUT)
            trial.tracker.log_metrics(run_id, {"bpb_target": bpb}, step)
            if step < config.lapt.max_steps:
                trial.report({METRIC: bpb})
        model_dir = Path(config.output_dir) / config.name / "model"
        model_dir.mkdir(parents=True, exist_ok=True)
        build_tiny_model(model_dir)  # a real checkpoint: the registry refuses a folder that would not serve
        np.save(model_dir / "logits.npy", logits)
    lineage = {"vocadapt.source_model": "tiny-unigram", "vocadapt.tokenizer_sha256": "00" * 32,
               "vocadapt.corpus_sha256": "11" * 32, "vocadapt.git_commit": "test", "vocadapt.method": method,
               "vocadapt.target_language": "it"}
    return TrialOutcome({METRIC: bpb, "bpb_source": bpb + 1.0}, run_id, str(model_dir), method, lineage)
