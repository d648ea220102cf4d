"""Lazy checkpoint surgery for models too big to load (Llama-3.1-8B on a laptop).

Only the input-embedding and LM-head tensors are read (safetensors ``safe_open``); each is adapted from its own
source matrix, one at a time, and written to a new shard. Shards without those tensors are hard-linked (or copied);
shards that also held them are rewritten byte for byte without them. The tokenizer, an updated config, the index
and a record (``vocadapt_init.json``) complete a folder ``AutoModelForCausalLM.from_pretrained`` loads. Everything is
written to a temporary folder beside ``out_dir`` and renamed at the end, so a failure leaves nothing half-written.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from vocadapt.components.surgery import safetensors_files as files
from vocadapt.components.initializers import ConfiguredInitializer, configure_initializer
from vocadapt.components.surgery.matrices import InitInputs, Initialisation, adapt_matrix
from vocadapt.components.surgery.in_memory import SPECIAL_ID_FIELDS, target_special_ids
from vocadapt.components.surgery.plan import RowLayout, VocabularyPlan, plan_vocabulary
from vocadapt.components.surgery.streaming import DEFAULT_BUDGET_BYTES
from vocadapt.components.tokenizers.saving import save_tokenizer

NEW_SHARD = "model-vocadapt-embeddings.safetensors"
RECORD_NAME = "vocadapt_init.json"
EXTRA_HEAD_NAME = "mtp_heads.{index}.weight"
# Files that come from the target tokenizer, never from the source folder.
_TOKENIZER_FILES = {
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model", "vocab.json",
    "merges.txt", "added_tokens.json", "chat_template.jinja", "chat_template.json", "vocab.txt",
}


_NOT_COPIED = (".safetensors", ".bin", ".pt", ".pth", ".pkl", ".ckpt", ".py", ".pyc")


# (input embeddings, LM head) as the common causal-LM families name them; anything else asks the architecture.
_KNOWN_NAMES = (
    ("model.embed_tokens.weight", "lm_head.weight"),  # Llama, Mistral, Qwen, Gemma, Phi-3, SmolLM
    ("transformer.wte.weight", "lm_head.weight"),  # GPT-2, Falcon-style
    ("gpt_neox.embed_in.weight", "embed_out.weight"),  # Pythia
)


def embedding_tensor_names(source_dir: Path, names: set[str]) -> tuple[str, str | None]:
    """(input-embedding tensor, LM-head tensor or None when the checkpoint stores no separate head).

    Common families are recognised by name (importing a modeling module costs seconds); otherwise the module names
    come from the architecture built on the meta device (no memory), and a checkpoint that spells them differently
    is matched on the last two name parts.
    """
    for input_name, head_name in _KNOWN_NAMES:
        if input_name in names:
            return input_name, head_name if head_name in names else None
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(str(source_dir), trust_remote_code=False)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    module_names = {id(module): name for name, module in model.named_modules()}
    head = model.get_output_embeddings()
    wanted = [module_names[id(model.get_input_embeddings())] + ".weight"]
    wanted.append(module_names[id(head)] + ".weight" if head is not None else None)
    found: list[str | None] = []
    for name in wanted:
        if name is None or name in names:
            found.append(name)
            continue
        tail = ".".join(name.split(".")[-2:])
        matches = sorted(candidate for candidate in names if candidate.endswith(tail))
        found.append(matches[0] if matches else None)
    if found[0] is None:
        raise ValueError(f"no input-embedding tensor {wanted[0]!r} in the checkpoint; is it a causal LM checkpoint?")
    return found[0], found[1]


def _updated_config(source_dir: Path, tokenizers: tuple[Any, Any], rows: int) -> dict[str, Any]:
    """The source's config.json with the target's rows and special ids (``tokenizers``: source, target)."""
    config = json.loads((source_dir / "config.json").read_text())
    config["vocab_size"] = rows
    config.pop("auto_map", None)  # custom modeling code is never carried into an output checkpoint
    for field in SPECIAL_ID_FIELDS:
        config[field] = target_special_ids(config.get(field), field, *tokenizers)
    return config


def _copy_side_files(source_dir: Path, tmp: Path, tokenizers: tuple[Any, Any], shard_names: set[str]) -> None:
    source_tokenizer, target_tokenizer = tokenizers
    skipped = _TOKENIZER_FILES | shard_names | {files.INDEX_NAME, "config.json", RECORD_NAME}
    for path in sorted(source_dir.iterdir()):
        # neither weights (pickles included) nor custom code (*.py) are copied: outputs hold safetensors and data
        if path.is_file() and path.name not in skipped and not path.name.endswith(_NOT_COPIED):
            shutil.copyfile(path, tmp / path.name)
    generation = tmp / "generation_config.json"
    if generation.exists():
        settings = json.loads(generation.read_text())
        for field in SPECIAL_ID_FIELDS:
            settings[field] = target_special_ids(settings.get(field), field, source_tokenizer, target_tokenizer)
        generation.write_text(json.dumps(settings, indent=2) + "\n")
    save_tokenizer(target_tokenizer, tmp)


def _write_shards(source_dir: Path, tmp: Path, weight_map: dict[str, str], new_tensors: list[str], link: str):
    """Link/rewrite the old shards beside the new one (written already, holding ``new_tensors``); returns (new weight
    map, what happened to each shard)."""
    new_map: dict[str, str] = {name: NEW_SHARD for name in new_tensors}
    actions: dict[str, str] = {}
    for shard in sorted(set(weight_map.values())):
        inside = {name for name, file in weight_map.items() if file == shard}
        dropped = inside & set(new_tensors)
        # A single model.safetensors beside an index would be loaded instead of the index: rename it.
        out_name = "model-body.safetensors" if shard == files.SINGLE_NAME else shard
        if dropped:
            kept_bytes = files.copy_without(source_dir / shard, tmp / out_name, dropped)
            actions[shard] = f"rewritten without {sorted(dropped)}" if kept_bytes else "dropped (held only replaced tensors)"
            if not kept_bytes:
                continue
        else:
            actions[shard] = files.link_or_copy(source_dir / shard, tmp / out_name, link)
        new_map.update({name: out_name for name in inside - dropped})
    return dict(sorted(new_map.items())), actions


@dataclass(frozen=True)
class CheckpointWriting:
    """How the adapted folder is written.

    link: how unchanged shards reach ``out_dir``: "hardlink" (copy across file systems), "symlink" or "copy".
    overwrite: replace an existing ``out_dir`` (refused otherwise).
    extra_heads: multi-token prediction ("0.01GB" §5): this many extra heads ``mtp_heads.{i}.weight``, each a copy
        of the adapted LM head.
    memory_budget_bytes: for a ``columnwise`` method, the float32 column block the matrices are streamed through
        (``streaming``: the peak stays bounded whatever the vocabulary or hidden size; a matrix that fits is one
        block, the same bytes as the whole-matrix path); a ``row_blocks`` method is streamed by rows whenever it is
        not None (the same bytes too). None: every method holds whole matrices.
    record_extra: entries added to the record (a trim's counts).
    """

    link: str = "hardlink"
    overwrite: bool = False
    extra_heads: int = 0
    memory_budget_bytes: int | None = DEFAULT_BUDGET_BYTES
    record_extra: dict[str, Any] | None = None


@dataclass(frozen=True)
class _SourceTensors:
    """The source checkpoint's folder, its weight map (tensor -> shard) and the (role, tensor name) pairs adapted:
    the input embeddings first, then the LM head when it is a tensor of its own."""

    folder: Path
    weight_map: dict[str, str]
    roles: list[tuple[str, str]]


@dataclass(frozen=True)
class _NewRows:
    """What each matrix's new rows need: the plan, the configured method and what it reads."""

    plan: VocabularyPlan
    method: ConfiguredInitializer
    inputs: InitInputs


def adapt_checkpoint(
    source_dir: str | Path,
    target_tokenizer_dir: str | Path,
    out_dir: str | Path,
    initialisation: Initialisation,
    *,
    layout: RowLayout = RowLayout(),
    writing: CheckpointWriting = CheckpointWriting(),
) -> dict[str, Any]:
    """Adapt a safetensors checkpoint to the target tokenizer; returns the record written to ``vocadapt_init.json``.

    initialisation: the method and what it reads; its helper is a
        :class:`~vocadapt.components.helpers.TokenVectors`, or a helper spec string (``"fasttext"``, ``"model:DIR"``,
        ``"vectors:FILE"``) resolved against the target tokenizer and its ``corpus_files``.
    layout: replace or expand, the rows, and the rows to copy when the caller knows them (a trim); default:
        computed from the tokenizers (``plan_vocabulary``).
    writing: links, overwriting, extra heads, the streaming budget and the record's extra entries.
    """
    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

    source_dir, out_dir = Path(source_dir), Path(out_dir)
    method = configure_initializer(initialisation.method, initialisation.options)
    helper, seed, extra_heads = initialisation.helper, initialisation.seed, writing.extra_heads
    if not isinstance(helper, str):
        method.check_helper(helper)  # before any work; a spec string is checked once it is resolved below
    if out_dir.exists() and not writing.overwrite:
        raise ValueError(f"out_dir {out_dir} already exists; choose another out_dir or pass overwrite=True")
    weight_map = files.weight_map(source_dir)
    if not (source_dir / "config.json").exists():
        raise ValueError(f"{source_dir} has no config.json; give a Hugging Face checkpoint folder")
    input_name, head_name = embedding_tensor_names(source_dir, set(weight_map))
    source_tokenizer = load_pretrained_tokenizer(str(source_dir))
    target_tokenizer = load_pretrained_tokenizer(str(target_tokenizer_dir))
    source_rows = files.read_header(source_dir / weight_map[input_name])[0][input_name]["shape"][0]
    # planned before a helper is trained: a tokenizer with ids past the rows is refused before any work
    plan = plan_vocabulary(source_tokenizer, target_tokenizer, source_rows=source_rows, layout=layout)
    if isinstance(helper, str):
        from vocadapt.components.helpers import resolve_helper

        helper = resolve_helper(helper, target_tokenizer=target_tokenizer,
                                corpus_files=initialisation.corpus_files, seed=seed)
        method.check_helper(helper)  # "none" resolves to no helper
    roles = [("input", input_name)] + ([("output", head_name)] if head_name and head_name != input_name else [])
    source = _SourceTensors(source_dir, weight_map, roles)
    started = time.perf_counter()
    new_rows = _NewRows(plan, method, InitInputs(source_tokenizer, target_tokenizer, seed=seed, helper=helper,
                                                 corpus_files=initialisation.corpus_files))
    streamed = (method.columnwise or method.row_blocks) and writing.memory_budget_bytes is not None
    if streamed:  # a column block (columnwise) or a chunk of rows (row_blocks) at a time, never a whole matrix

        def write_new_shard(path: Path, scratch: Path) -> dict[str, float]:
            return _stream_tensors(path, scratch, source, new_rows, extra_heads, writing.memory_budget_bytes)
    else:
        new_tensors, seconds = _adapt_tensors(source, new_rows)
        for index in range(extra_heads):
            new_tensors[EXTRA_HEAD_NAME.format(index=index)] = new_tensors[roles[-1][1]].clone()

        def write_new_shard(path: Path, scratch: Path) -> dict[str, float]:
            from safetensors.torch import save_file

            save_file(new_tensors, str(path), metadata={"format": "pt"})
            return seconds
    record = {
        "method": method.name, "mode": layout.mode, "options": dict(method.options), "seed": seed, **plan.record(),
        "tied": len(roles) == 1, "tensors": {role: name for role, name in roles}, "extra_heads": extra_heads,
        "helper": helper.record() if hasattr(helper, "record") else None,
        "source_model": str(source_dir), "target_tokenizer": str(target_tokenizer_dir),
        "streamed": streamed, **(writing.record_extra or {}),
    }

    def write_and_note(path: Path, scratch: Path) -> dict[str, float]:
        seconds = write_new_shard(path, scratch)
        record["effective_options"] = method.effective_options()  # once the method ran: what it chose included
        return seconds

    _write_folder(source, out_dir, write_and_note, new_rows, record, writing)
    record["seconds"] = round(time.perf_counter() - started, 3)
    return record


def _stream_tensors(path, scratch, source: _SourceTensors, new_rows: _NewRows, extra_heads, budget_bytes):
    """The new shard written role by role, each matrix a column block at a time (``streaming``); returns the
    method's seconds per role."""
    from vocadapt.components.surgery import streaming

    plan, method, roles = new_rows.plan, new_rows.method, source.roles
    sources = {role: streaming.TensorFile(source.folder / source.weight_map[name], name) for role, name in roles}
    try:
        declared = [(name, sources[role].dtype, (plan.rows, sources[role].hidden)) for role, name in roles]
        head_role, head_name = roles[-1]
        declared += [(EXTRA_HEAD_NAME.format(index=index), sources[head_role].dtype, (plan.rows, sources[head_role].hidden))
                     for index in range(extra_heads)]
        writer = streaming.ShardWriter(path, declared)
        seconds = {}
        for role, name in roles:
            if method.columnwise:
                rows, seconds[role] = streaming.initialise_by_columns(
                    sources[role], plan, method, scratch, budget_bytes=budget_bytes, inputs=new_rows.inputs,
                    role=role)
            else:  # row_blocks: the method reads the rows it needs and its rows are written as they come
                rows, seconds[role] = streaming.initialise_by_rows(sources[role], plan, method, scratch,
                                                                   inputs=new_rows.inputs, role=role)
            streaming.write_adapted(writer, sources[role], plan, rows)
            for new_path, _, _ in rows:
                new_path.unlink()
            seconds[role] = round(seconds[role], 3)
        for _ in range(extra_heads):
            writer.copy(head_name)
        writer.close()
    finally:
        for opened in sources.values():
            opened.close()
    return seconds


def read_tensor(shard: Path, name: str) -> torch.Tensor:
    """One tensor of a shard, in its own dtype (no float32 copy: the initialisers read the rows they need as
    float32)."""
    from safetensors import safe_open

    with safe_open(str(shard), framework="pt") as handle:
        return handle.get_tensor(name)


def _adapt_tensors(source: _SourceTensors, new_rows: _NewRows) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """Read, adapt and keep each role's tensor, one at a time (peak: the source matrix being adapted beside the
    adapted ones, each in the checkpoint's dtype)."""
    new_tensors: dict[str, torch.Tensor] = {}
    seconds: dict[str, float] = {}
    for role, name in source.roles:
        matrix = read_tensor(source.folder / source.weight_map[name], name)
        new_tensors[name], seconds[role] = adapt_matrix(matrix, new_rows.plan, new_rows.method, new_rows.inputs,
                                                        role=role)
        seconds[role] = round(seconds[role], 3)
        del matrix
    return new_tensors, seconds


def _write_folder(source: _SourceTensors, out_dir: Path, write_new_shard, new_rows: _NewRows, record: dict[str, Any],
                  writing: CheckpointWriting) -> None:
    source_dir, weight_map = source.folder, source.weight_map
    new_names = [name for _, name in source.roles] + [EXTRA_HEAD_NAME.format(index=index)
                                                       for index in range(writing.extra_heads)]
    tokenizers = (new_rows.inputs.source_tokenizer, new_rows.inputs.target_tokenizer)
    tmp = out_dir.parent / f".{out_dir.name}.vocadapt-tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        scratch = tmp / ".scratch"  # column blocks of a streamed matrix; removed before the folder is complete
        scratch.mkdir()
        record["method_seconds"] = write_new_shard(tmp / NEW_SHARD, scratch)
        shutil.rmtree(scratch)
        new_map, actions = _write_shards(source_dir, tmp, weight_map, new_names, writing.link)
        total = sum(files.data_size(tmp / shard) for shard in set(new_map.values()))
        index = {"metadata": {"total_size": total}, "weight_map": new_map}
        (tmp / files.INDEX_NAME).write_text(json.dumps(index, indent=2) + "\n")
        (tmp / "config.json").write_text(json.dumps(_updated_config(source_dir, tokenizers, new_rows.plan.rows), indent=2) + "\n")
        _copy_side_files(source_dir, tmp, tokenizers, set(weight_map.values()))
        record["shards"] = actions
        (tmp / RECORD_NAME).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        if out_dir.exists() and writing.overwrite:
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
