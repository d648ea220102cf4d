"""Loading models and tokenizers under the config's safety settings.

``trust_remote_code`` stays off unless the config opts in by name; weights load from safetensors only.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from vocadapt.components.errors import UserError
from vocadapt.platform.config import EMBEDDED_MODEL, ExperimentConfig

# Weight files that unpickle when loaded: loading one can run arbitrary code.
_PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".ckpt")


def check_model_folder(folder: str | Path, *, what: str, trust_remote_code: bool = False, rows: bool = True) -> None:
    """Refuse a local checkpoint folder that could run code when loaded; nothing is unpickled or imported here.

    Refused: no safetensors weights (pickled ``pytorch_model.bin``, ``.pt`` or ``.pth`` only), any problem
    ``components/model_folder_checks.py::check_checkpoint`` finds (no or unreadable config.json, a truncated or
    damaged shard, shards and index that disagree, embedding or head rows that disagree with ``vocab_size`` or
    miss a tokenizer id, two tokens on one id, a special id past the rows), and a config with ``auto_map`` (custom
    modeling code) unless ``trust_remote_code``, which only the config's ``source.trust_remote_code: true`` turns
    on. ``rows=False``: the rows and special ids are left to the caller's own report. ``what`` names the input in
    the message (e.g.
    ``--model``). ``source.model`` naming a hub id reaches here as its local snapshot (``resolve_inputs`` calls
    :func:`resolve_model_folder`), so the checks read the files that will be loaded; a name that is still not a
    local folder is left to transformers' own loading.
    """
    from vocadapt.components.model_folder_checks import check_checkpoint

    folder = Path(folder)
    if not folder.is_dir():
        return
    shards = sorted(folder.glob("*.safetensors"))
    if not shards:
        pickles = sorted(path.name for path in folder.iterdir() if path.name.endswith(_PICKLE_SUFFIXES))
        found = f"only pickled weights ({', '.join(pickles)})" if pickles else "no weights"
        raise UserError(f"{what} {folder} has {found} and no *.safetensors; vocadapt loads safetensors only, "
                        "because pickled weights can run code when loaded: convert the checkpoint to safetensors "
                        "(e.g. load it where you trust it and save_pretrained(..., safe_serialization=True))")
    config = check_checkpoint(folder, what, rows=rows)  # config, shards, index, rows, tokenizer ids, special ids
    if config.get("auto_map") and not trust_remote_code:
        raise UserError(f"{what} {folder}: config.json has auto_map (custom modeling code, "
                        f"{sorted(config['auto_map'])}), which would run Python from the folder; vocadapt runs none "
                        "unless a config sets source.trust_remote_code: true; use a model whose architecture "
                        "transformers ships, or opt in by name if you trust that code")


# What vocadapt takes from a hub repository: config, safetensors weights and tokenizer files. Never pickled weights
# (Mistral-7B-v0.1 ships pytorch_model-*.bin beside its safetensors; Llama-3.1-8B ships original/consolidated.00.pth).
HUB_MODEL_FILES = ("*.json", "*.safetensors", "tokenizer.model", "*.tiktoken", "merges.txt", "vocab.txt",
                   "*.jinja")


def looks_like_hub_id(name: str) -> bool:
    """``ORG/NAME`` that is not a local path: what the hub (or its local cache) is asked for."""
    return (name.count("/") == 1 and not name.startswith((".", "/", "~")) and not Path(name).expanduser().exists()
            and all(part.strip() for part in name.split("/")))


def resolve_model_folder(name: str, *, what: str, revision: str | None = None) -> str:
    """The local folder a model name stands for: a folder as it is; a hub id (``meta-llama/Llama-3.1-8B``) through
    huggingface_hub's cache, fetching only config, safetensors and tokenizer files when the hub is reachable, and
    from the cache alone with ``HF_HUB_OFFLINE=1``. Every check (:func:`check_model_folder`) and every load then
    reads the resolved folder, so a hub model passes the same safetensors-only and remote-code checks as a local
    one. A UserError names the model and the fix when it is neither reachable nor cached."""
    if not looks_like_hub_id(name):
        return name
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import GatedRepoError, LocalEntryNotFoundError, RepositoryNotFoundError

    shown = f"{name}@{revision}" if revision else name
    try:
        return snapshot_download(name, revision=revision, allow_patterns=list(HUB_MODEL_FILES))
    except (GatedRepoError, RepositoryNotFoundError) as error:
        raise UserError(f"{what} {shown}: the hub refuses it ({type(error).__name__}); check the name, accept the "
                        "model's licence on its hub page and log in (`hf auth login` or HF_TOKEN), or give a local "
                        "folder") from error
    except (LocalEntryNotFoundError, OSError) as error:
        where = constants.HF_HUB_CACHE
        offline = " (HF_HUB_OFFLINE is set)" if constants.HF_HUB_OFFLINE else ""
        raise UserError(f"{what} {shown} is not in the hub cache at {where}{offline} and the hub cannot be reached "
                        f"({type(error).__name__}); download it once where the hub is reachable (`hf download "
                        f"{name}`), point HF_HUB_CACHE at a cache that holds it, or give a local folder") from error


def strip_custom_code(folder: Path) -> None:
    """Remove custom code from a saved output checkpoint: ``*.py`` files and the configs' ``auto_map``
    (``save_pretrained`` copies both from a model loaded with remote code)."""
    for path in folder.glob("*.py"):
        path.unlink()
    for name in ("config.json", "tokenizer_config.json"):
        config_file = folder / name
        if config_file.is_file():
            config = json.loads(config_file.read_text(encoding="utf-8"))
            if isinstance(config, dict) and config.pop("auto_map", None) is not None:
                config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def check_teacher(lapt, source_model: str | Path | None) -> Path | None:
    """The teacher a 'distill' objective reads (``lapt.teacher``, else the source model), checked like any model
    folder before a run opens; None when the objective does not distil. The one place that decides the teacher:
    the pipelines' preflight, the LAPT request and Ray's plan all ask it."""
    if not lapt.distills:
        return None
    from vocadapt.components.errors import UserError

    if not (lapt.teacher or source_model):
        raise UserError(f"lapt.objective {lapt.objective!r} distils from a teacher, but none was given; set "
                        "lapt.teacher to a model folder (adapt and lapt use the source model by default)")
    teacher = Path(lapt.teacher or source_model)
    if not teacher.is_dir():
        raise UserError(f"lapt.teacher {teacher} is not a local folder; the 'distill' objective needs the model to "
                        "distil from (a folder with its weights and tokenizer; default: the source model)")
    check_model_folder(teacher, what="lapt.teacher")
    return teacher


def load_causal_lm(folder: str | Path, *, what: str, dtype: Any = None, trust_remote_code: bool = False,
                   revision: str | None = None):
    """The one way a checkpoint folder becomes a model: :func:`check_model_folder` first, then transformers with
    ``use_safetensors=True``; remote code only when ``trust_remote_code`` (``source.trust_remote_code``)."""
    import torch
    from transformers import AutoModelForCausalLM

    check_model_folder(folder, what=what, trust_remote_code=trust_remote_code)
    kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
    if revision:
        kwargs["revision"] = revision
    return AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype or torch.float32, use_safetensors=True,
                                                **kwargs)


def load_checkpoint_tokenizer(folder: str | Path, *, trust_remote_code: bool = False):
    """A checkpoint folder's tokenizer, without remote code unless opted in."""
    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

    return load_pretrained_tokenizer(str(folder), trust_remote_code=trust_remote_code)


def _load_kwargs(config: ExperimentConfig) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"trust_remote_code": config.source.trust_remote_code}
    if config.source.revision:
        kwargs["revision"] = config.source.revision
    return kwargs


def load_source_tokenizer(config: ExperimentConfig, model: str):
    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

    return load_pretrained_tokenizer(model, **_load_kwargs(config))


def load_target_tokenizer(name: str):
    """``tokenizer.pretrained``: an existing tokenizer (folder or hub name), without remote code."""
    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

    from vocadapt.components.errors import UserError

    try:
        return load_pretrained_tokenizer(name, trust_remote_code=False)
    except (OSError, ValueError) as error:
        raise UserError(f"tokenizer.pretrained: no tokenizer could be loaded from {name!r} ({error}); give a "
                        "folder with tokenizer.json or tokenizer.model, a hub name reachable from here, or null "
                        "to train one") from error  # fmt: skip


def load_source_model(config: ExperimentConfig, model: str):
    import torch

    loaded = load_causal_lm(model, what="source.model", dtype=getattr(torch, config.source.dtype),
                            trust_remote_code=config.source.trust_remote_code, revision=config.source.revision)
    return loaded.eval()


def load_model(path: Path, what: str = "model"):
    """(model, tokenizer) from a folder: safetensors only, no remote code, eval mode, float32 on CPU."""
    model = load_causal_lm(path, what=what)
    tokenizer = load_checkpoint_tokenizer(path)
    return model.eval(), tokenizer


def registered_model_name(config: ExperimentConfig) -> str:
    """``vocadapt-<lang>-<short model name>``, e.g. vocadapt-it-smollm2-135m; with several target languages every
    code, in order (vocadapt-it-de-ru-smollm2-135m), so the model is not registered under one language's name."""
    if config.source.model == EMBEDDED_MODEL:
        short = "smollm2-135m"
    else:
        short = Path(config.source.model.rstrip("/")).name.lower()
    short = re.sub(r"[^a-z0-9.-]+", "-", short).strip("-")
    return f"vocadapt-{'-'.join(config.target.languages)}-{short}"


__all__ = ["HUB_MODEL_FILES", "check_model_folder", "load_causal_lm", "load_checkpoint_tokenizer", "load_model",
           "load_source_model", "load_source_tokenizer", "load_target_tokenizer", "looks_like_hub_id",
           "registered_model_name", "resolve_model_folder", "strip_custom_code"]


def load_tokenizer(spec: str):
    """A fast tokenizer from a folder, a .gguf file or ``embedded``; a UserError naming the fix otherwise."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

    if spec == "embedded":
        from vocadapt.platform.assets.embedded import load_assets

        try:
            spec = str(load_assets().model_dir)
        except Exception as error:  # AssetsNotBuilt and friends carry the fix in their message
            raise UserError(str(error)) from error
    path = Path(spec)
    if not path.exists():
        raise UserError(f"tokenizer {spec!r} not found; pass a tokenizer folder, a .gguf file or 'embedded'")
    if path.is_dir():
        from vocadapt.components.model_folder_checks import read_tokenizer_ids

        # tokenizer.json or tokenizer.model readable (a damaged file named with its line), one token per id
        read_tokenizer_ids(path, "tokenizer")
    try:
        if path.suffix == ".gguf":
            return load_pretrained_tokenizer(str(path.parent), gguf_file=path.name)
        return load_pretrained_tokenizer(str(path))
    except (OSError, ValueError) as error:
        raise UserError(f"cannot load a tokenizer from {spec}: {error}; pass a folder with tokenizer.json") from error
