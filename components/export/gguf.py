"""A checkpoint folder to one GGUF file, written by llama.cpp's own converter and quantised by llama.cpp.

The converter runs in a process of its own (``llama_cpp_converter.py``); quantisation calls llama.cpp's
``llama_model_quantize`` through llama-cpp-python. Nothing here writes GGUF by hand.

llama.cpp names a BPE vocabulary's pre-tokenizer by hashing the ids the tokenizer gives one fixed text, so an
adapted vocabulary (new ids) is never in its table even when its pre-tokenizer is the source's. The export then
names the pre-tokenizer from the tokenizer's own normalizer and pre-tokenizer settings
(:data:`KNOWN_PRE_TOKENIZERS`), and refuses, before writing anything, a combination llama.cpp has no name for.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from vocadapt.components.collector import parse_json
from vocadapt.components.errors import UserError
from vocadapt.components.export.gguf_metadata import gguf_metadata

QUANTS = ("f16", "q8_0", "q4_k_m")

# sha256 of the canonical JSON of tokenizer.json's {"normalizer", "pre_tokenizer"} -> llama.cpp's pre-tokenizer
# name. Each entry is a real tokenizer's settings, and the name is the one llama.cpp's table gives that tokenizer
# (tests/export/test_gguf_families.py checks the families' entries, and llama.cpp's ids on their adapted
# vocabularies); for GPT-2's byte-level regex, "gpt-2"
# rather than SmolLM2's "smollm", which also splits digits one by one: SmolLM2's vocabulary has no multi-digit
# token, an adapted one may.
KNOWN_PRE_TOKENIZERS = {
    "9721f40eb4254f2428c7a268bdbddb483cab41df0aa92021ec79f44788acf135": "gpt-2",  # ByteLevel, GPT-2's regex
    "0b203869fced33203d17c133c3b3bb0e54e41e8ef4730e07ea9ade11879b840e": "llama-bpe",  # Llama-3.1
    "f64ce79efdd97727e8943eeb2749e209c6559130bb7d7faf0497f2362ea6f884": "qwen2",  # Qwen3
    "aa540206a5f5f44cfb5329c9a554205f144983a3300fc769c93c7187449b876d": "deepseek-v3",  # DeepSeek-V3
    # Gemma-3's ' ' -> '▁' normaliser and split on ' ' (llama.cpp's table names the real one
    # "granite-embed-multi-311m", the same pre-tokenizer type as "gemma4")
    "ce116cc681eb3125efb9aff186f4f4123e9839dc5f1005080a824d1588454df3": "gemma4",
}


@dataclass(frozen=True)
class GgufPlan:
    """What the converter will do with a folder, decided before anything is written."""

    architecture: str
    tokenizer_file: str
    pre_tokenizer: str | None
    """llama.cpp's pre-tokenizer name (None where the converter reads the vocabulary without one: SentencePiece,
    and Llama-2's and Mistral's byte-fallback BPE)"""


@dataclass(frozen=True)
class GgufFile:
    path: Path
    quant: str
    sha256: str
    size_bytes: int
    seconds: float
    plan: GgufPlan
    probes: int | None = None
    """texts llama.cpp tokenized as the tokenizer does before the file was written (None: llama-cpp-python is
    not installed, so only the metadata was checked)"""


def _splitting_settings(node):
    """``node`` without ``trim_offsets``, which moves offsets but never changes how text is split (a tokenizer
    trained like Qwen3's writes true where Qwen3's own says false)."""
    if isinstance(node, dict):
        return {key: _splitting_settings(value) for key, value in node.items() if key != "trim_offsets"}
    if isinstance(node, list):
        return [_splitting_settings(value) for value in node]
    return node


def _read_tokenizer_json(model_dir: Path) -> dict:
    return parse_json((Path(model_dir) / "tokenizer.json").read_text(encoding="utf-8"))


def _fingerprint(data: dict) -> tuple[str, dict]:
    settings = _splitting_settings({"normalizer": data.get("normalizer"), "pre_tokenizer": data.get("pre_tokenizer")})
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest(), settings


def pre_tokenizer_fingerprint(model_dir: Path) -> tuple[str, dict]:
    """(sha256, settings) of tokenizer.json's normalizer and pre-tokenizer, as far as they decide the splitting."""
    return _fingerprint(_read_tokenizer_json(model_dir))


def _known_pre_tokenizer(model_dir: Path) -> str | None:
    """The llama.cpp name of a BPE tokenizer.json's pre-tokenizer, from :data:`KNOWN_PRE_TOKENIZERS`. The file is
    parsed once here (Gemma-3's 33 MB took about 1.5 s a parse; it was parsed twice)."""
    if not (Path(model_dir) / "tokenizer.json").is_file():
        return None
    data = _read_tokenizer_json(model_dir)
    if data["model"].get("type") != "BPE":
        return None
    return KNOWN_PRE_TOKENIZERS.get(_fingerprint(data)[0])


def _run_converter(converter: Path, *arguments: str) -> dict:
    command = [sys.executable, "-m", "vocadapt.components.export.llama_cpp_converter", *arguments]
    result = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    lines = [line for line in result.stdout.splitlines() if line.startswith("VOCADAPT_RESULT ")]
    if result.returncode != 0 or not lines:
        raise RuntimeError(f"llama.cpp's converter failed ({' '.join(arguments[:2])}):\n{result.stderr[-3000:]}")
    return json.loads(lines[-1].removeprefix("VOCADAPT_RESULT "))


def _refusal(model_dir: Path, found: dict) -> UserError:
    if not found["supported"]:
        return UserError(f"llama.cpp's converter has no support for {found['architecture']} (in {model_dir}/"
                         "config.json); GGUF export works for the architectures llama.cpp converts (Llama, Mistral, "
                         "Qwen3, Gemma-3, DeepSeek-V3, ...); nothing was written")
    fingerprint, settings = pre_tokenizer_fingerprint(model_dir)
    return UserError(
        f"llama.cpp has no pre-tokenizer for the tokenizer in {model_dir} (normalizer and pre-tokenizer "
        f"{json.dumps(settings)[:400]}, fingerprint {fingerprint[:12]}): a GGUF of it would split text "
        "differently from the tokenizer. Adapt from a source whose pre-tokenizer llama.cpp knows (GPT-2's "
        "byte-level regex, Llama-3, Qwen, DeepSeek-V3, or a SentencePiece vocabulary); nothing was written")


def convert_to_gguf(model_dir: Path, outfile: Path, converter: Path) -> GgufPlan:
    """llama.cpp's converter writes ``outfile`` (f16) from ``model_dir``; ``UserError`` when llama.cpp cannot
    represent the model (its architecture, or its pre-tokenizer). ``outfile`` may then hold a partial file: the
    caller writes it in a scratch folder."""
    model_dir = Path(model_dir)
    fallback = _known_pre_tokenizer(model_dir)
    found = _run_converter(converter, "convert", str(converter), str(model_dir), str(outfile), "f16",
                           *([fallback] if fallback else []))
    if not found["written"]:
        raise _refusal(model_dir, found)
    return GgufPlan(found["architecture"], found["tokenizer_file"], found["pre"])


def _check_tokenizer(model_dir: Path, gguf_path: Path, tokenizer) -> None:
    problems = tokenizer_mismatches(gguf_path, tokenizer)
    if problems:
        raise UserError(f"llama.cpp's converter wrote tokenizer metadata that differs from {model_dir}'s tokenizer "
                        f"({'; '.join(problems)}), so llama.cpp would read other tokens; nothing was written")


def _normalizer_types(tokenizer) -> set[str]:
    """The types of the tokenizer's normalizers, a Sequence's included. Only the normalizer is serialised, not the
    whole tokenizer (Gemma-3's: 1.7 s to serialise and parse, for a one-line normalizer)."""
    normalizer = tokenizer.backend_tokenizer.normalizer
    return normalizer_node_types(None if normalizer is None else json.loads(normalizer.__getstate__()))


def normalizer_node_types(node: dict | None) -> set[str]:
    """The types in a tokenizer.json ``normalizer`` node, a Sequence's members included."""
    found, nodes = set(), [node]
    while nodes:
        node = nodes.pop()
        if isinstance(node, dict):
            found.add(node.get("type"))
            nodes.extend(node.get("normalizers") or [])
    return found


def vocabulary_probe_texts(tokenizer, per_text: int = 12, most: int = 1000, seed: int = 0) -> list[str]:
    """Text made of the vocabulary's own tokens: the ordinary tokens (not added, not byte tokens), in a seeded
    random order, decoded ``per_text`` at a time (at most ``most`` texts: every token of a vocabulary up to 12,000,
    a sample of a larger one), so that tokens and many pairs the merges never made meet llama.cpp's tokenizer.

    Two differences belong to the family, not to the export, and are left out. Leading whitespace: a
    SentencePiece-style tokenizer.json whose Metaspace prepends '▁' to the start of a text skips it when the text
    already begins with a space, where llama.cpp, like SentencePiece, always prepends. Unicode normalisation:
    llama.cpp applies none, so where the tokenizer NFC-normalises (Qwen3's) the texts are given in NFC; a family's
    own tokenizer, unadapted, differs from llama.cpp in the same two places."""
    import random
    import re
    import unicodedata

    added = set(tokenizer.get_added_vocab().values())
    ids = [index for index, token in enumerate(tokenizer.convert_ids_to_tokens(list(range(len(tokenizer)))))
           if index not in added and token is not None and not re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", token)]
    random.Random(seed).shuffle(ids)
    nfc = "NFC" in _normalizer_types(tokenizer)
    texts = []
    for start in range(0, min(len(ids), most * per_text), per_text):
        text = tokenizer.decode(ids[start:start + per_text]).lstrip()
        if text:
            texts.append(unicodedata.normalize("NFC", text) if nfc else text)
    return texts


def _check_llama_cpp_tokenization(model_dir: Path, gguf_path: Path, tokenizer=None) -> int | None:
    """llama.cpp's own tokenizer, reading the GGUF, gives the tokenizer's ids on :data:`PROBE_TEXTS` and on text
    made of every token of the vocabulary; ``UserError`` where it does not. None when llama-cpp-python is absent.
    ``tokenizer``: ``model_dir``'s, when the caller has loaded it already."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return None
    from vocadapt.components.export.llama_cpp_checks import PROBE_TEXTS, load_vocabulary, tokenization_differences
    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

    if tokenizer is None:
        tokenizer = load_pretrained_tokenizer(str(model_dir))
    texts = [*PROBE_TEXTS, *vocabulary_probe_texts(tokenizer)]
    llm = load_vocabulary(gguf_path)
    try:
        differing, shown = tokenization_differences(llm, tokenizer, texts)
    finally:
        llm.close()
    if differing:
        raise UserError(f"llama.cpp, reading the GGUF of {model_dir}, tokenizes {differing} of {len(texts)} probe "
                        f"texts to other ids than the tokenizer ({'; '.join(shown)}), so the model would be fed "
                        "tokens it was not trained on; nothing was written")
    return len(texts)


def quantize_gguf(source: Path, target: Path, quant: str) -> None:
    """llama.cpp's own quantiser (``llama_model_quantize``) from an f16 GGUF."""
    import llama_cpp

    ftype = {"q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0, "q4_k_m": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M}[quant]
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = os.cpu_count() or 1
    status = llama_cpp.llama_model_quantize(str(source).encode(), str(target).encode(), params)
    if status != 0 or not target.is_file():
        raise RuntimeError(f"llama.cpp could not quantise {source} to {quant} (status {status})")


def export_gguf(model_dir: Path, out_path: Path, quant: str, converter: Path) -> GgufFile:
    """Write ``out_path`` (a GGUF of ``model_dir`` at ``quant``); the file appears only once it is complete."""
    if quant not in QUANTS:
        raise UserError(f"unknown quantisation {quant!r}; choose one of {', '.join(QUANTS)}")
    if quant != "f16":
        import llama_cpp  # noqa: F401 (refuse before converting when the quantiser is missing)
    started = time.perf_counter()
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_path.parent, prefix=".gguf-") as scratch:
        f16 = Path(scratch) / "f16.gguf"
        plan = convert_to_gguf(model_dir, f16, converter)
        from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

        tokenizer = load_pretrained_tokenizer(str(model_dir))  # once for both checks (seconds for Gemma-3's)
        _check_tokenizer(model_dir, f16, tokenizer)
        probes = _check_llama_cpp_tokenization(model_dir, f16, tokenizer)
        final = f16
        if quant != "f16":
            final = Path(scratch) / f"{quant}.gguf"
            quantize_gguf(f16, final, quant)
        os.replace(final, out_path)
    digest = hashlib.sha256()
    with out_path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return GgufFile(out_path, quant, digest.hexdigest(), out_path.stat().st_size, time.perf_counter() - started,
                    plan, probes)


def tokenizer_mismatches(gguf_path: Path, tokenizer) -> list[str]:
    """Where the GGUF's tokenizer metadata differs from ``tokenizer`` (a transformers tokenizer): the tokens in id
    order, the merges (byte-level BPE), the special ids and the chat template, read by :func:`gguf_metadata`."""
    fields = gguf_metadata(gguf_path, ["tokenizer.ggml.tokens", "tokenizer.ggml.model", "tokenizer.ggml.merges",
                                       "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                       "tokenizer.chat_template"])

    def value(key: str):
        return fields.get(key)

    problems = []
    tokens = value("tokenizer.ggml.tokens") or []
    expected = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    # llama.cpp matches an added, non-special token against the text before it turns spaces into '▁', so its
    # converter writes such a token's '▁' as ' ' (Gemma-3's '▁▁', '▁▁▁', ...)
    for index, added in tokenizer.added_tokens_decoder.items():
        if not added.special and index < len(tokens) and tokens[index] == expected[index].replace("\u2581", " "):
            expected[index] = tokens[index]
    differing = [i for i, (a, b) in enumerate(zip(tokens, expected)) if a != b]
    if len(tokens) < len(expected) or differing:
        first = differing[0] if differing else len(tokens)
        problems.append(f"tokens: {len(tokens)} in the GGUF, {len(expected)} in the tokenizer; first difference at "
                        f"id {first}")
    if value("tokenizer.ggml.model") == "gpt2":
        merges = [" ".join(pair) if isinstance(pair, list) else pair
                  for pair in parse_json(tokenizer.backend_tokenizer.to_str())["model"]["merges"]]
        if (value("tokenizer.ggml.merges") or []) != merges:
            problems.append(f"merges: {len(value('tokenizer.ggml.merges') or [])} in the GGUF, {len(merges)} in the "
                            "tokenizer, or in another order")
    for role in ("bos", "eos"):
        want = getattr(tokenizer, f"{role}_token_id")
        have = value(f"tokenizer.ggml.{role}_token_id")
        if want is not None and have != want:
            problems.append(f"{role} id: {have} in the GGUF, {want} in the tokenizer")
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, str) and value("tokenizer.chat_template") != template:
        problems.append("chat template differs")
    return problems
