"""Checks of a checkpoint folder, a tokenizer folder and a helper vectors file that read headers and small files
only, so a damaged input is refused before any work instead of failing stages later.

A safetensors file is an 8-byte little-endian header length, a JSON header (tensor name -> dtype, shape,
``data_offsets`` relative to the end of the header) and the tensor bytes, which must cover the rest of the file
exactly (the safetensors library refuses a file whose offsets leave a gap, overlap or run past its end). Checking
a shard therefore reads its header and its size, never its tensors.

Each problem is a :class:`UserError` naming the file (and the tensor, token or line) and the fix.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vocadapt.components.errors import UserError
from vocadapt.components.input_files import read_json

INDEX_NAME = "model.safetensors.index.json"
# Bytes per element of the safetensors dtypes whose size is whole bytes (sub-byte formats are not size-checked).
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I16": 2, "U16": 2, "F16": 2,
               "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8, "C64": 8}
SUB_BYTE_DTYPES = ("F4", "F6_E2M3", "F6_E3M2")
# Tensor name endings of input embeddings and LM heads in the common causal-LM families (Llama, Mistral, Qwen,
# Gemma, SmolLM: embed_tokens; GPT-2: wte; Pythia: embed_in / embed_out).
EMBEDDING_ENDINGS = ("embed_tokens.weight", "wte.weight", "embed_in.weight", "word_embeddings.weight")
HEAD_ENDINGS = ("lm_head.weight", "embed_out.weight")
SPECIAL_ID_FIELDS = ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id", "decoder_start_token_id")
RESAVE = "save the checkpoint again (save_pretrained(..., safe_serialization=True)) or copy it again whole"


@dataclass(frozen=True)
class TensorInfo:
    shard: str
    dtype: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class TokenizerIds:
    """What a tokenizer folder's files say about its ids: how many, the highest, and where they were read."""

    count: int
    highest: int
    source: str


def check_safetensors_file(path: Path, what: str) -> dict[str, TensorInfo]:
    """The tensors of one safetensors file, after checking its header parses and its byte ranges cover the data
    exactly (no gap, no overlap, nothing past the end, each range the size its dtype and shape need)."""
    path = Path(path)
    size = path.stat().st_size

    def refuse(problem: str) -> UserError:
        return UserError(f"{what}: {path} {problem}; the file is truncated or damaged: {RESAVE}")

    if size < 8:
        raise refuse(f"has {size} bytes, fewer than the 8 of a safetensors header length")
    with open(path, "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        if 8 + length > size:
            raise refuse(f"says its header has {length:,} bytes but the file has only {size - 8:,} after the length")
        raw = handle.read(length)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise refuse(f"has a header that is not JSON ({error})") from None
    if not isinstance(header, dict):
        raise refuse("has a header that is not a JSON object")
    header.pop("__metadata__", None)
    data_size = size - 8 - length
    tensors: dict[str, TensorInfo] = {}
    ranges = []
    for name, entry in header.items():
        try:
            dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
            valid = (isinstance(dtype, str) and isinstance(shape, list)
                     and all(isinstance(n, int) and n >= 0 for n in [*shape, begin, end]) and begin <= end)
        except (KeyError, TypeError, ValueError):
            valid = False
        if not valid:
            raise refuse(f"has a malformed header entry for tensor {name!r} ({entry!r})")
        if dtype not in DTYPE_BYTES and dtype not in SUB_BYTE_DTYPES:
            raise refuse(f"gives tensor {name!r} the unknown dtype {dtype!r}")
        if dtype in DTYPE_BYTES and end - begin != math.prod(shape) * DTYPE_BYTES[dtype]:
            raise refuse(f"gives tensor {name!r} ({dtype} {shape}) {end - begin:,} bytes instead of "
                         f"{math.prod(shape) * DTYPE_BYTES[dtype]:,}")
        tensors[name] = TensorInfo(path.name, dtype, tuple(shape))
        ranges.append((begin, end, name))
    position = 0
    for begin, end, name in sorted(ranges):
        if begin != position:
            raise refuse(f"has tensor {name!r} at byte {begin:,} where {position:,} was expected (a gap or an "
                         "overlap between tensors)")
        position = end
    if position > data_size:
        raise refuse(f"needs {position:,} bytes of tensor data but holds only {data_size:,}")
    if position < data_size:
        raise refuse(f"holds {data_size - position:,} bytes after its last tensor")
    return tensors


def check_weight_files(folder: Path, what: str) -> dict[str, TensorInfo]:
    """Every tensor of the folder's safetensors files, each shard checked (:func:`check_safetensors_file`), and the
    shards consistent with each other and with ``model.safetensors.index.json`` when there is one: no tensor in
    two shards, every shard the index names present, every tensor where the index says and every tensor of a named
    shard in the index."""
    folder = Path(folder)
    tensors: dict[str, TensorInfo] = {}
    shards = sorted(folder.glob("*.safetensors"))
    for shard in shards:
        for name, info in check_safetensors_file(shard, what).items():
            if name in tensors:
                raise UserError(f"{what} {folder}: tensor {name!r} is in two shards ({tensors[name].shard} and "
                                f"{shard.name}), which disagree on what the model holds; {RESAVE}")
            tensors[name] = info
    index_file = folder / INDEX_NAME
    if not index_file.is_file():
        return tensors
    index = read_json(index_file, f"{what} index", f"{RESAVE} (the index is written with the shards)")
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise UserError(f"{what} {index_file} has no weight_map of tensor name -> shard file; {RESAVE}")
    missing = sorted(set(weight_map.values()) - {shard.name for shard in shards})
    if missing:
        raise UserError(f"{what} {index_file} names shard(s) {', '.join(missing)}, which are not in {folder}; copy "
                        "every shard the index lists, or " + RESAVE)
    for name, shard in weight_map.items():
        if name not in tensors or tensors[name].shard != shard:
            found = f"it is in {tensors[name].shard}" if name in tensors else "no shard holds it"
            raise UserError(f"{what} {index_file} puts tensor {name!r} in {shard}, but {found}: the index and the "
                            f"shards disagree; {RESAVE}")
    named = set(weight_map.values())
    unlisted = sorted(name for name, info in tensors.items() if info.shard in named and name not in weight_map)
    if unlisted:
        raise UserError(f"{what} {index_file} does not list tensor(s) {', '.join(unlisted[:3])} of its shards: the "
                        f"index and the shards disagree; {RESAVE}")
    return tensors


def check_model_config(folder: Path, what: str) -> dict[str, Any]:
    """config.json: present, UTF-8, JSON, an object."""
    config_file = Path(folder) / "config.json"
    if not config_file.is_file():
        raise UserError(f"{what} {folder} has no config.json; give a Hugging Face checkpoint folder (config.json, "
                        "*.safetensors and the tokenizer files, as save_pretrained writes them)")
    config = read_json(config_file, f"{what} config", "save the checkpoint again (save_pretrained) or fix config.json")
    if not isinstance(config, dict):
        raise UserError(f"{what} {config_file} holds {type(config).__name__}, not a JSON object; save the "
                        "checkpoint again (save_pretrained)")
    return config


def config_vocab_size(config: dict[str, Any]) -> Any:
    """``vocab_size``, or a multimodal config's ``text_config.vocab_size``; None when neither is given."""
    text = config.get("text_config")
    return config.get("vocab_size", text.get("vocab_size") if isinstance(text, dict) else None)


# The files read_tokenizer_ids reads: tokenizer.json alone where the folder has one, else the SentencePiece model with
# the added tokens of the two JSON files. Their bytes, not the folder, are the key of its per-process cache.
_TOKENIZER_JSON = "tokenizer.json"
_SENTENCEPIECE_FILES = ("tokenizer.model", "tokenizer_config.json", "added_tokens.json")
_TOKENIZER_IDS_CACHE: dict[tuple, tuple[int, int, str]] = {}


def read_tokenizer_ids(folder: Path, what: str) -> TokenizerIds | None:
    """The ids of the tokenizer saved in ``folder`` (tokenizer.json, else a SentencePiece tokenizer.model with the
    added tokens of tokenizer_config.json / added_tokens.json), refusing two tokens on one id; None when the folder
    holds neither file.

    The answer is kept per process, keyed by a digest of the bytes of the files it reads: parsing a 128k-262k-token
    tokenizer.json in Python takes seconds (hashing it, tens of milliseconds), and one adapt checks the same
    tokenizer several times, in the source folder and in each folder it writes it to (the initialised checkpoint,
    LAPT's output, the registered version the serve check downloads)."""
    folder = Path(folder)
    if (folder / _TOKENIZER_JSON).is_file():
        key = (_TOKENIZER_JSON, file_digest(folder / _TOKENIZER_JSON))
    else:
        key = ("sentencepiece", *(file_digest(folder / name) for name in _SENTENCEPIECE_FILES))
    if key in _TOKENIZER_IDS_CACHE:
        count, highest, file_name = _TOKENIZER_IDS_CACHE[key]
        return TokenizerIds(count, highest, str(folder / file_name))
    ids = _read_tokenizer_ids(folder, what)
    if ids is not None:
        if len(_TOKENIZER_IDS_CACHE) >= 64:
            _TOKENIZER_IDS_CACHE.clear()
        _TOKENIZER_IDS_CACHE[key] = (ids.count, ids.highest, Path(ids.source).name)
    return ids


def file_digest(path: Path) -> str | None:
    """A digest of the file's bytes (blake2b, 16 bytes, hex: tens of milliseconds for a 262K-token tokenizer.json),
    what a per-process cache of a parsed file is keyed by; None when the file cannot be read."""
    import hashlib

    try:
        return hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()
    except OSError:
        return None


def _read_tokenizer_ids(folder: Path, what: str) -> TokenizerIds | None:
    tokens: dict[int, str] = {}

    def put(token_id: Any, token: str, where: str) -> None:
        if not isinstance(token_id, int) or isinstance(token_id, bool) or token_id < 0:
            raise UserError(f"{what} {where}: token {token!r} has id {token_id!r}, not a non-negative integer; save "
                            "the tokenizer again (save_pretrained)")
        if token_id in tokens and tokens[token_id] != token:
            raise UserError(f"{what} {where}: tokens {tokens[token_id]!r} and {token!r} share id {token_id}, so "
                            "decoding that id is ambiguous; give each token its own id (save the tokenizer again, "
                            "or remove the duplicate)")
        tokens[token_id] = token

    tokenizer_json = folder / "tokenizer.json"
    if tokenizer_json.is_file():
        data = read_json(tokenizer_json, what, "save the tokenizer again (save_pretrained) or pass another folder")
        model = data.get("model") if isinstance(data, dict) else None
        vocab = model.get("vocab") if isinstance(model, dict) else None
        if isinstance(vocab, dict):
            for token, token_id in vocab.items():
                put(token_id, token, str(tokenizer_json))
        elif isinstance(vocab, list):  # Unigram: [piece, score] pairs, the id is the position
            for token_id, entry in enumerate(vocab):
                put(token_id, str(entry[0] if isinstance(entry, list) and entry else entry), str(tokenizer_json))
        else:
            raise UserError(f"{what} {tokenizer_json} has no model.vocab; save the tokenizer again (save_pretrained)")
        for added in data.get("added_tokens") or []:
            if not isinstance(added, dict):
                raise UserError(f"{what} {tokenizer_json}: added_tokens holds {added!r}, not a token entry; save the "
                                "tokenizer again (save_pretrained)")
            put(added.get("id"), str(added.get("content")), f"{tokenizer_json} added_tokens")
        source = str(tokenizer_json)
    elif (folder / "tokenizer.model").is_file():
        import sentencepiece

        spm_file = folder / "tokenizer.model"
        try:
            processor = sentencepiece.SentencePieceProcessor(model_file=str(spm_file))
        except (OSError, RuntimeError) as error:
            raise UserError(f"{what} {spm_file} is not a SentencePiece model ({error}); save the tokenizer "
                            "again or pass another folder") from None
        for token_id in range(processor.get_piece_size()):
            tokens[token_id] = processor.id_to_piece(token_id)
        config_file = folder / "tokenizer_config.json"
        if config_file.is_file():
            decoder = (read_json(config_file, what, "save the tokenizer again (save_pretrained)") or {})
            for key, entry in (decoder.get("added_tokens_decoder") or {}).items() if isinstance(decoder, dict) else ():
                content = entry.get("content") if isinstance(entry, dict) else entry
                put(int(key) if str(key).isdigit() else key, str(content), f"{config_file} added_tokens_decoder")
        added_file = folder / "added_tokens.json"
        if added_file.is_file():
            added = read_json(added_file, what, "save the tokenizer again (save_pretrained)")
            for token, token_id in (added.items() if isinstance(added, dict) else ()):
                put(token_id, token, str(added_file))
        source = str(spm_file)
    else:
        return None
    if not tokens:
        raise UserError(f"{what} {source} holds no token; save the tokenizer again (save_pretrained)")
    return TokenizerIds(len(tokens), max(tokens), source)


def check_tokenizer_folder(path: Path, what: str) -> TokenizerIds:
    """A tokenizer folder vocadapt can load: it exists and holds tokenizer.json or tokenizer.model, readable, with
    one token per id."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{what} {path} does not exist; give a tokenizer folder (tokenizer.json or tokenizer.model)")
    if not path.is_dir():
        raise UserError(f"{what} {path} is a file; give the folder that holds tokenizer.json or tokenizer.model")
    ids = read_tokenizer_ids(path, what)
    if ids is None:
        raise UserError(f"{what} {path} has neither tokenizer.json nor tokenizer.model; give a folder a tokenizer was "
                        "saved to (tokenizer.save_pretrained(folder))")
    return ids


def _rows(tensors: dict[str, TensorInfo], endings: tuple[str, ...]) -> list[tuple[str, int]]:
    return [(name, info.shape[0]) for name, info in sorted(tensors.items())
            if name.endswith(endings) and len(info.shape) == 2]


def check_rows(folder: Path, what: str, config: dict[str, Any], tensors: dict[str, TensorInfo],
               tokenizer: TokenizerIds | None) -> None:
    """The embedding and LM-head rows agree with config.json's ``vocab_size``, cover the tokenizer's highest id,
    and config.json's special token ids are rows of the matrix."""
    vocab_size = config_vocab_size(config)
    if vocab_size is not None and (not isinstance(vocab_size, int) or isinstance(vocab_size, bool) or vocab_size < 1):
        raise UserError(f"{what} {folder}/config.json: vocab_size is {vocab_size!r}, not a positive integer; set it "
                        "to the embedding's number of rows")
    matrices = _rows(tensors, EMBEDDING_ENDINGS) + _rows(tensors, HEAD_ENDINGS)
    for name, rows in matrices:
        if vocab_size is not None and rows != vocab_size:
            raise UserError(f"{what} {folder}: tensor {name} has {rows:,} rows but config.json says vocab_size "
                            f"{vocab_size:,}; they must agree (set vocab_size to {rows:,}, or save the checkpoint "
                            "again with model.resize_token_embeddings)")
    rows = matrices[0][1] if matrices else vocab_size
    if rows is None:
        return
    if tokenizer is not None and tokenizer.highest >= rows:
        raise UserError(f"{what} {folder}: its tokenizer ({tokenizer.source}) has ids up to {tokenizer.highest:,}, "
                        f"but the model has only {rows:,} embedding rows: ids {rows:,}..{tokenizer.highest:,} have no "
                        "row. Give the tokenizer saved with this model, or first resize the model's embeddings to "
                        f"at least {tokenizer.highest + 1:,} rows (model.resize_token_embeddings"
                        f"({tokenizer.highest + 1}), then save_pretrained)")
    for field in SPECIAL_ID_FIELDS:
        value = config.get(field)
        for token_id in value if isinstance(value, list) else [value]:
            if token_id is None:
                continue
            if not isinstance(token_id, int) or isinstance(token_id, bool) or not 0 <= token_id < rows:
                raise UserError(f"{what} {folder}/config.json: {field} {token_id!r} is not a row of the "
                                f"{rows:,}-row embedding; set it to the tokenizer's id of that token (or null)")


def check_checkpoint(folder: Path, what: str, *, rows: bool = True) -> dict[str, Any]:
    """Every file check of a local checkpoint folder; returns its config.json. ``rows=False`` leaves out
    :func:`check_rows` for a caller that reports rows and ids itself (the serve check before registration)."""
    config = check_model_config(folder, what)
    tensors = check_weight_files(folder, what)
    tokenizer = read_tokenizer_ids(folder, f"{what} tokenizer")
    if rows:
        check_rows(folder, what, config, tensors, tokenizer)
    return config


def check_vectors_file(path: Path, what: str) -> int:
    """A ``.vec`` text file (``count dim``, then ``word v1 ... vd`` per line): UTF-8, every line ``dim`` finite
    numbers; returns the dimension."""
    import numpy as np

    path = Path(path)
    if not path.is_file():
        raise UserError(f"{what} {path} does not exist; give a .vec file ('<count> <dim>', then one word and its "
                        "numbers per line)")
    dimension, vectors = 0, 0
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise UserError(f"{what} {path}, line {number}: not UTF-8; re-encode the file as UTF-8") from None
            parts = line.rstrip("\n").rstrip(" ").split(" ")
            if number == 1:
                if len(parts) != 2 or not all(part.isdigit() for part in parts) or int(parts[1]) < 1:
                    raise UserError(f"{what} {path}, line 1: {line.strip()!r} is not '<count> <dim>' (two positive "
                                    "integers); write the .vec header first")
                dimension = int(parts[1])
                continue
            if len(parts) != dimension + 1:
                raise UserError(f"{what} {path}, line {number}: {len(parts) - 1} values where the header says "
                                f"{dimension}; every line is a word and {dimension} numbers")
            try:
                values = np.asarray(parts[1:], dtype=np.float64)
            except ValueError:
                raise UserError(f"{what} {path}, line {number}: a value of {parts[0]!r} is not a number; write "
                                "decimal numbers") from None
            if not np.isfinite(values).all():
                raise UserError(f"{what} {path}, line {number}: the vector of {parts[0]!r} holds NaN or infinity; "
                                "remove that line or write finite numbers")
            vectors += 1
    if not vectors:
        raise UserError(f"{what} {path} holds no vector; write '<count> <dim>' and then one word per line")
    return dimension
