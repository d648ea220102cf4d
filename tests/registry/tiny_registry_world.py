"""A tiny adapted model on disk and the MLflow runs an adapt would have logged for it, built in the test.

The metric names are the adapt pipeline's: the parent run holds ``source_model.bpb_*`` and ``fertility.*``; the
method's child run holds ``bpb_<stream>_<zero_shot|after_lapt>``, and the generation metrics that
``vocadapt evaluate`` adds to a version's run. The out-of-domain bits per byte (``bpb_ood_*``) the default gates
read come with per-document parts in ``gates/items.json`` (:func:`synthetic_items`), as ``adapt`` logs them.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

ITALIAN = [
    "La città di Roma è la capitale d'Italia e conta molti abitanti.",
    "Il gatto dorme sul divano mentre fuori piove da ore.",
    "Domani andremo al mercato per comprare frutta e verdura fresca.",
    "La biblioteca comunale apre alle nove e chiude alle diciotto.",
] * 20
ENGLISH = ["The quick brown fox jumps over the lazy dog near the river bank."] * 20

GOOD_METRICS = {
    "parent": {"source_model.bpb_target": 2.0, "source_model.bpb_source": 1.0,
               "source_model.bpb_ood_target": 2.0, "source_model.bpb_ood_source": 1.0,
               "fertility.source_tokenizer.it.tokens_per_word": 2.0,
               "fertility.target_tokenizer.it.tokens_per_word": 1.4},
    "child": {"bpb_target_zero_shot": 3.0, "bpb_target_after_lapt": 1.9, "bpb_source_zero_shot": 1.4,
              "bpb_source_after_lapt": 1.1, "bpb_ood_target": 1.9, "bpb_ood_source": 1.1,
              # what `vocadapt evaluate` logs on the version's run: its generations and the source model's
              "generation.tokens_per_character": 0.30, "source_model.generation.tokens_per_character": 0.45,
              "generation.same_text_token_saving": 0.30},
}


def lineage(method: str = "fvt") -> dict[str, str]:
    return {"vocadapt.source_model": "tiny-llama", "vocadapt.tokenizer_sha256": "ab" * 32,
            "vocadapt.method": method, "vocadapt.corpus_sha256": "cd" * 32, "vocadapt.git_commit": "deadbeef",
            "vocadapt.target_language": "it"}


def build_tiny_model(folder: Path, head_dim: int = 8) -> Path:
    """A random tiny Llama (2 layers, 4 heads of ``head_dim``) with a byte-level BPE trained on a few sentences.

    vLLM's CPU attention needs a head size it has kernels for (64); the registry tests do not load it and use 8.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    backend.train_from_iterator(ITALIAN + ENGLISH, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<|endoftext|>",
                                        eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=4 * head_dim, intermediate_size=8 * head_dim,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         bos_token_id=0, eos_token_id=0, pad_token_id=0, tie_word_embeddings=True)
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # tied: a zero row is never the greedy pick, so served answers are readable text
        model.get_input_embeddings().weight[_partial_character_ids(tokenizer)] = 0.0
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _partial_character_ids(tokenizer) -> list[int]:
    """Ids whose text alone is not printable (a byte of a longer UTF-8 character, a control byte): a random model's
    answer made of them decodes to U+FFFD whatever the ids, and two different answers would read the same."""
    return [token_id for token_id in range(len(tokenizer))
            if not tokenizer.decode([token_id]).isprintable() or "\ufffd" in tokenizer.decode([token_id])]


def synthetic_items(metrics: dict[str, float], documents: int = 40):
    """Per-document parts whose sums give each gated ratio metric exactly (bits per byte, tokens per word or per
    character, the same-text saving), with a small spread that is the same on every model (so paired intervals
    are narrow): what ``adapt`` logs as ``gates/items.json``."""
    import numpy as np

    from vocadapt.components.evaluation.bootstrap import ratio_parts

    spread = np.tile([0.02, -0.02], documents // 2) * 100
    sizes = np.full(documents, 100.0)
    ids = [f"doc{index}" for index in range(documents)]
    items = {}
    for key, value in metrics.items():
        bare = key.removeprefix("source_model.")
        if bare.startswith("bpb_ood_") or bare.endswith("tokens_per_word") or bare == "generation.tokens_per_character":
            items[key] = ratio_parts(value * sizes + spread, sizes, ids)
        elif bare == "generation.same_text_token_saving":
            items[key] = ratio_parts((1 - value) * sizes + spread, sizes, ids, kind="saving")
    return items


def log_adapted_runs(tracker, metrics: dict[str, dict[str, float]] = GOOD_METRICS) -> tuple[str, str]:
    """A parent (adapt) run and a method child run with the given metrics and their per-document parts
    (:func:`synthetic_items`); returns (parent_id, child_id)."""
    from vocadapt.platform.registry.gate_items import log_gate_items

    with tracker.run("adapt", tags=lineage()) as parent:
        tracker.log_metrics(parent.info.run_id, metrics["parent"])
        log_gate_items(tracker, parent.info.run_id, synthetic_items(metrics["parent"]))
        with tracker.run("adapt/fvt", parent_run_id=parent.info.run_id) as child:
            tracker.log_metrics(child.info.run_id, metrics["child"])
            log_gate_items(tracker, child.info.run_id, synthetic_items(metrics["child"]))
    return parent.info.run_id, child.info.run_id


@contextmanager
def credentials(username: str | None, password: str | None):
    """Set (or clear) MLflow's basic-auth environment variables for the block."""
    keys = ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")
    old = {key: os.environ.get(key) for key in keys}
    for key, value in zip(keys, (username, password)):
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextmanager
def basic_auth_server(folder: Path, admin_password: str):
    """A real ``mlflow server --app-name basic-auth`` with its user database in ``folder``."""
    from tests.mlflow_server import mlflow_server

    ini = folder / "basic_auth.ini"
    ini.write_text(
        "[mlflow]\ndefault_permission = READ\n"
        f"database_uri = sqlite:///{folder / 'auth.db'}\nadmin_username = admin\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
        "auth_cache_ttl_seconds = 300\n",  # PBKDF2 per request otherwise: seconds each on a loaded machine
        encoding="utf-8",
    )
    env = {"MLFLOW_AUTH_CONFIG_PATH": str(ini), "MLFLOW_AUTH_ADMIN_PASSWORD": admin_password,
           "MLFLOW_FLASK_SERVER_SECRET_KEY": "test-secret-key-not-for-production"}
    with credentials(None, None), mlflow_server(folder, extra_args=("--app-name", "basic-auth"), env=env) as url:
        yield url
