"""Will this checkpoint serve? The check the registry runs before a model is registered.

- **Embedding rows**: the input embeddings (and an untied head) have exactly ``config.vocab_size`` rows; vLLM sizes
  its matrices by the config and refuses weights of another shape.
- **Token ids**: every id the tokenizer can produce (its vocabulary, added tokens, bos/eos/pad/unk) and every special
  id in ``config.json`` / ``generation_config.json`` is below the number of rows: a phantom id (one with no row)
  crashes the GPU kernel or reads another token's row.
- **Head**: tied or untied as the config says. Tied with a stored ``lm_head.weight`` that differs from the embeddings
  means the trained head is silently dropped at load; untied without one means a random head.
- **Decoding**: a probe set (Italian and English text, digits, punctuation, accents, double spaces, newlines,
  emoji, and every added token with spaces around it) decodes to the same text in transformers (what
  ``mlflow.pyfunc`` and ``vocadapt evaluate`` use) and as a server streams it: the completion text after a prompt,
  detokenized one token at a time. That stream is computed in this environment with ``tokenizers``' ``DecodeStream``
  (what vLLM's fast detokenizer runs) and, where the vLLM serving environment exists
  (``platform/evaluation/serving.py``), by vLLM's own tokenizer and engine detokenizer in that environment
  (``vllm_decode_probe.py``, the process ``vllm_probe_process.py`` keeps), which also checks that vLLM encodes the
  probe texts to the same ids. Without that environment the vLLM half is reported as skipped, never as passed. A
  difference names the case and the first token that differs.
- **Served answers** (``greedy_decode``, ``served_answer_mismatch``): what a server, the pyfunc or ``mlflow models
  serve`` answers for a prompt is compared with transformers' greedy decode of the same checkpoint: the same first
  tokens where the server reports its ids, and the same text.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vocadapt.components.collector import collector_paused
from vocadapt.components.errors import UserError
from vocadapt.platform.serving.vllm_probe_process import VllmProbe, vllm_cache_file

PROBES = (
    "La capitale d'Italia è Roma, e conta più di due milioni di abitanti.",
    "Perché così? Più città, più caffè: l'università è lì.",
    "The quick brown fox jumps over the lazy dog.",
    "Il 25 dicembre 2024 alle 10:30 (ora locale) costava 3,50 € o $4.99.",
    "due  spazi,   tre spazi e un tab\tfinale ",
    " inizia con uno spazio\nriga due\n\nriga quattro",
    "«Citazione» — “virgolette” e 'apici'; fine.",
    "Emoji 🙂 e ideogrammi 日本語, poi ümlaut e ñ.",
    "def f(x): return x[0] + y{1}  # codice",
    "Staccati : virgola , punto . Domanda ? Sì ! It 's and don 't .",  # what clean_up_tokenization_spaces rewrites
)
EMBEDDING_SUFFIXES = ("embed_tokens.weight", "wte.weight", "word_embeddings.weight", "embed_in.weight")
HEAD_NAMES = ("lm_head.weight", "embed_out.weight")
SPECIAL_CONFIG_KEYS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")


@dataclass
class Finding:
    check: str
    status: str  # "pass", "fail" or "skipped"
    detail: str


@dataclass
class ServeCheckReport:
    model_dir: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(finding.status != "fail" for finding in self.findings)

    @property
    def failures(self) -> list[Finding]:
        return [finding for finding in self.findings if finding.status == "fail"]

    def summary(self) -> str:
        return "; ".join(f"{f.check}: {f.status}" for f in self.findings)

    def as_dict(self) -> dict[str, Any]:
        return {"model_dir": self.model_dir, "passed": self.passed, "findings": [asdict(f) for f in self.findings]}


class NotServableError(UserError):
    """A checkpoint that would not serve as it was trained: the message lists each failed check."""


# ----------------------------------------------------------------------------------------------- weights


def _tensor_shapes(model_dir: Path) -> dict[str, list[int]]:
    from vocadapt.components.surgery.safetensors_files import read_header

    shapes: dict[str, list[int]] = {}
    for shard in sorted(model_dir.glob("*.safetensors")):
        header, _, _ = read_header(shard)
        shapes.update({name: entry["shape"] for name, entry in header.items()})
    return shapes


def _find(shapes: dict[str, list[int]], suffixes: tuple[str, ...]) -> str | None:
    names = sorted((name for name in shapes if name.endswith(suffixes) and len(shapes[name]) == 2), key=len)
    return names[0] if names else None


def _load_tensor(model_dir: Path, name: str):
    from safetensors import safe_open

    for shard in sorted(model_dir.glob("*.safetensors")):
        with safe_open(str(shard), framework="pt") as handle:
            if name in handle.keys():
                return handle.get_tensor(name)
    raise KeyError(name)


def _text_config(model_dir: Path):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(model_dir), trust_remote_code=False)
    return config, config.get_text_config()


def _special_ids(model_dir: Path, config, tokenizer) -> dict[str, int]:
    """Every special id the server may emit or stop on: the tokenizer's, config.json's, generation_config.json's."""
    ids: dict[str, int] = {}
    generation = _json(model_dir / "generation_config.json")
    sources = (("config.json", config.to_dict()), ("generation_config.json", generation))
    for source, values in sources:
        for key in SPECIAL_CONFIG_KEYS:
            value = values.get(key)
            for index, item in enumerate(value if isinstance(value, list) else [value]):
                if isinstance(item, int):
                    ids[f"{source} {key}" + (f"[{index}]" if isinstance(value, list) else "")] = item
    for attribute in ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id"):
        value = getattr(tokenizer, attribute, None)
        if isinstance(value, int):
            ids[f"tokenizer {attribute}"] = value
    return ids


def _json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def check_rows(model_dir: Path, config, text_config, tokenizer, shapes) -> list[Finding]:
    vocab_size = int(text_config.vocab_size)
    embedding = _find(shapes, EMBEDDING_SUFFIXES)
    findings = []
    if embedding is None:
        return [Finding("embedding rows", "fail", f"no input embedding tensor ({', '.join(EMBEDDING_SUFFIXES)}) "
                        "in the safetensors files")]
    rows = shapes[embedding][0]
    head = _find(shapes, HEAD_NAMES)
    problems = [f"{embedding} has {rows} rows but config.vocab_size is {vocab_size}"] if rows != vocab_size else []
    if head is not None and shapes[head][0] != rows:
        problems.append(f"{head} has {shapes[head][0]} rows but {embedding} has {rows}")
    findings.append(Finding("embedding rows", "fail" if problems else "pass",
                            "; ".join(problems) or f"{rows} rows = config.vocab_size"))
    vocabulary = tokenizer.get_vocab()
    phantom = sorted((token_id, token) for token, token_id in vocabulary.items() if token_id >= rows)
    problems = []
    if phantom:
        shown = ", ".join(f"{token!r}={token_id}" for token_id, token in phantom[:5])
        problems.append(f"{len(phantom)} tokenizer ids have no embedding row (ids >= {rows}: {shown}"
                        + (", ..." if len(phantom) > 5 else "") + ")")
    if len(tokenizer) > rows:
        problems.append(f"the tokenizer has {len(tokenizer)} tokens for {rows} embedding rows")
    problems += [f"{where} = {token_id} has no embedding row (rows: {rows})"
                 for where, token_id in _special_ids(model_dir, config, tokenizer).items()
                 if not 0 <= token_id < rows]
    findings.append(Finding("token ids", "fail" if problems else "pass", "; ".join(problems) or
                            f"{len(tokenizer)} tokenizer ids and every special id fit {rows} rows"))
    return findings


def check_head(model_dir: Path, text_config, shapes) -> Finding:
    import torch

    tied = bool(getattr(text_config, "tie_word_embeddings", False))
    embedding, head = _find(shapes, EMBEDDING_SUFFIXES), _find(shapes, HEAD_NAMES)
    if tied:
        if head is None:
            return Finding("head", "pass", "tied (config.tie_word_embeddings: true), no separate head stored")
        same = embedding is not None and torch.equal(_load_tensor(model_dir, head), _load_tensor(model_dir, embedding))
        return Finding("head", "pass" if same else "fail",
                       f"tied, and {head} equals {embedding}" if same else
                       f"config.tie_word_embeddings is true but {head} differs from {embedding}: loaders tie the head "
                       "to the embeddings and the trained head is dropped; save with tie_word_embeddings: false")
    if head is None:
        return Finding("head", "fail", "config.tie_word_embeddings is false but no lm_head.weight is stored: the "
                       "head would be randomly initialised at load; save the head or set tie_word_embeddings: true")
    hidden = shapes[embedding][1] if embedding else None
    if shapes[head][1] != hidden:
        return Finding("head", "fail", f"{head} has shape {shapes[head]}, embeddings {shapes[embedding]}")
    return Finding("head", "pass", f"untied (config.tie_word_embeddings: false), {head} stored")


# ---------------------------------------------------------------------------------------------- decoding


def probe_cases(tokenizer) -> list[dict[str, Any]]:
    """Probe texts (with every added token between spaces) as (text, prompt ids, output ids): the sequence is split
    once after the special prefix (a completion of nothing) and once in the middle."""
    specials = set(tokenizer.all_special_tokens)
    added = [token for token in tokenizer.get_added_vocab() if token not in specials]
    texts = list(PROBES) + [text for token in added for text in (f"prima {token} dopo", f"{token}{token} e {token}.")]
    # Every text encoded in one batch call a side (the same ids as a call per text), with the garbage collector
    # paused (components/collector.py): Gemma-3's 6,415 added tokens make 12,830 texts and an encoding object each.
    # In a process that has imported the adapt pipeline, median 0.95 s a call per text, 0.73 s now
    # (benchmarks/serve_check_probes.py).
    with collector_paused():
        with_specials = tokenizer(texts)["input_ids"]
        without_specials = tokenizer(texts, add_special_tokens=False)["input_ids"]
    cases = []
    for text, ids, plain in zip(texts, with_specials, without_specials, strict=True):
        ids, plain = list(ids), list(plain)
        prefix = next((index for index in range(len(ids)) if ids[index:] == plain[: len(ids) - index]), 0)
        for split in sorted({prefix, _text_boundary(tokenizer, ids, prefix + (len(ids) - prefix) // 2)}):
            cases.append({"text": text, "prompt_ids": ids[:split], "output_ids": ids[split:], "plain_ids": plain})
    return cases


def _text_boundary(tokenizer, ids: list[int], split: int) -> int:
    """The nearest split at or after ``split`` where the prompt decodes to whole characters: a prompt comes from text,
    so it never ends inside a character that byte-level tokens spell over several ids."""
    for candidate in range(split, len(ids)):
        if "\ufffd" not in tokenizer.decode(ids[:candidate], skip_special_tokens=True):
            return candidate
    return len(ids)


def stream_completion(tokenizer, prompt_ids: list[int], output_ids: list[int]) -> str:
    """The completion text as vLLM's fast detokenizer streams it: ``DecodeStream`` primed with the prompt."""
    from tokenizers.decoders import DecodeStream

    stream = DecodeStream(ids=prompt_ids, skip_special_tokens=True)
    return "".join(stream.step(tokenizer.backend_tokenizer, token_id) or "" for token_id in output_ids)


def _mismatches(cases, expected, got, what: str, tokenizer=None) -> list[str]:
    """One line per case whose ``got`` text differs from transformers' ``expected``; with ``tokenizer``, the line
    names the first token whose text the other side does not reproduce."""
    found = []
    for case, want, have in zip(cases, expected, got, strict=True):
        if want != have:
            where = f" at {first_differing_token(tokenizer, case['prompt_ids'] + case['output_ids'], have)}" \
                if tokenizer is not None else ""
            found.append(f"{case['text']!r}{where}: transformers {want!r}, {what} {have!r}")
    return found


def token_name(tokenizer, token_id: int) -> str:
    """``id 123 'Ġcittà'``: a token as an error message names it (its stored string, never ``decode([id])``)."""
    return f"id {token_id} {tokenizer.convert_ids_to_tokens(int(token_id))!r}"


def first_differing_token(tokenizer, ids: list[int], text: str, start: int = 0) -> str:
    """The first token of ``ids[start:]`` whose text ``text`` does not continue with: the part of transformers'
    decode of the ids up to and including it that the whole decode keeps (a partial character's U+FFFD may become
    a character with the next token) is not a prefix of ``text``."""
    whole = tokenizer.decode(ids, skip_special_tokens=True)
    for position in range(start, len(ids)):
        decoded = tokenizer.decode(ids[: position + 1], skip_special_tokens=True)
        kept = next((length for length in range(len(decoded), -1, -1) if whole.startswith(decoded[:length])), 0)
        if not text.startswith(decoded[:kept]):
            return f"token {position - start} ({token_name(tokenizer, ids[position])})"
    return f"the end (the other side continues after token {len(ids) - start - 1})"


def encode_mismatch(tokenizer, want: list[int], have: list[int], other: str = "vLLM") -> str:
    """Where two token sequences part (transformers' ``want``, ``other``'s ``have``): the position and both tokens."""
    position = next((i for i, (a, b) in enumerate(zip(want, have)) if a != b), min(len(want), len(have)))
    ours = token_name(tokenizer, want[position]) if position < len(want) else "nothing"
    theirs = token_name(tokenizer, have[position]) if position < len(have) else "nothing"
    return f"token {position}: transformers {ours}, {other} {theirs}"


def check_decoding_here(tokenizer, cases) -> Finding:
    expected = [tokenizer.decode(c["prompt_ids"] + c["output_ids"], skip_special_tokens=True) for c in cases]
    if not hasattr(tokenizer, "backend_tokenizer"):
        return Finding("decode (streamed, tokenizers)", "skipped", "no fast tokenizer: the stream is vLLM's slow "
                       "path, checked only in the vLLM environment")
    served = [tokenizer.decode(c["prompt_ids"], skip_special_tokens=True)
              + stream_completion(tokenizer, c["prompt_ids"], c["output_ids"]) for c in cases]
    bad = _mismatches(cases, expected, served, "streamed", tokenizer)
    return Finding("decode (streamed, tokenizers)", "fail" if bad else "pass",
                   "; ".join(bad[:3]) + (f" (+{len(bad) - 3} more)" if len(bad) > 3 else "") if bad else
                   f"{len(cases)} probe completions decode identically in full and streamed")



def check_decoding_vllm(model_dir: Path, tokenizer, cases, venv: Path | None = None) -> Finding:
    from vocadapt.platform.evaluation.serving import serving_python, serving_venv_dir

    check = "decode (vLLM)"
    missing = Finding(check, "skipped", f"no vLLM serving environment at {venv or serving_venv_dir()}: the vLLM half "
                      "runs where it exists (`python -m vocadapt.platform.evaluation.serving` builds it)")
    if not serving_python(venv).is_file():
        return missing
    cache = vllm_cache_file(model_dir, cases, serving_python(venv))
    if cache.is_file():
        report = json.loads(cache.read_text(encoding="utf-8"))
    else:
        report, error = VllmProbe.ask(serving_python(venv), {"folder": str(Path(model_dir).resolve()),
                                                             "cases": cases})
        if report is None and "No module named 'vllm'" in error:
            return missing
        if report is None:
            return Finding(check, "fail", f"vLLM could not load the tokenizer: {error.strip()[-600:]}")
        cache.parent.mkdir(parents=True, exist_ok=True)
        temporary = cache.with_suffix(".tmp")
        temporary.write_text(json.dumps(report), encoding="utf-8")
        temporary.replace(cache)
    return compare_vllm_report(tokenizer, cases, report)



def compare_vllm_report(tokenizer, cases, report: dict[str, Any]) -> Finding:
    """The vLLM half's verdict on ``vllm_decode_probe.py``'s report: each case's encoding, decode and streamed
    completion must equal transformers'; a difference names the case and the first token that differs."""
    check = "decode (vLLM)"
    results = report["results"]
    if len(results) != len(cases):
        return Finding(check, "fail", f"vLLM answered {len(results)} probe cases of {len(cases)}")
    expected = [tokenizer.decode(c["prompt_ids"] + c["output_ids"], skip_special_tokens=True) for c in cases]
    bad = _mismatches(cases, expected, [r["decode"] for r in results], "vLLM decode", tokenizer)
    bad += _mismatches(cases, expected, [r["prompt_decode"] + r["completion"] for r in results],
                       f"vLLM streamed ({report['detokenizer']})", tokenizer)
    bad += [f"{c['text']!r} at {encode_mismatch(tokenizer, c['plain_ids'], r['encode'])}: transformers encodes "
            f"{c['plain_ids']}, vLLM {r['encode']}" for c, r in zip(cases, results) if c["plain_ids"] != r["encode"]]
    return Finding(check, "fail" if bad else "pass",
                   "; ".join(bad[:3]) + (f" (+{len(bad) - 3} more)" if len(bad) > 3 else "") if bad else
                   f"{len(cases)} probe cases encode, decode and stream identically in vLLM "
                   f"({report['detokenizer']})")


# ---------------------------------------------------------------------------------------- served answers


def greedy_decode(model_dir: Path, prompt: str, max_new_tokens: int) -> list[int]:
    """The token ids transformers' greedy decode appends to ``prompt`` (special tokens added as the tokenizer adds
    them): what every served answer of the checkpoint (vLLM, ``vocadapt serve``, the pyfunc, ``mlflow models
    serve``) is compared with."""
    import torch

    from vocadapt.platform.model_loading import load_model

    model, tokenizer = load_model(Path(model_dir), what="model to compare with its served answers")
    encoded = tokenizer(prompt, return_tensors="pt")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    with torch.no_grad():
        generated = model.generate(**encoded, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=pad)
    return generated[0, encoded["input_ids"].shape[1]:].tolist()


def served_answer_mismatch(tokenizer, expected_ids: list[int], served_text: str,
                           served_ids: list[int] | None = None, *, first_tokens: int = 4) -> str | None:
    """None when a served completion is transformers' greedy one: the same first ``first_tokens`` ids (where the
    server reports its ids) and the same text (special tokens skipped); otherwise what differs, naming the token."""
    expected_text = tokenizer.decode(expected_ids, skip_special_tokens=True)
    if served_ids is not None and list(served_ids[:first_tokens]) != list(expected_ids[:first_tokens]):
        where = encode_mismatch(tokenizer, list(expected_ids[:first_tokens]), list(served_ids[:first_tokens]),
                                "served")
        return f"the served answer's first tokens differ from transformers' greedy decode at {where}"
    if served_text == expected_text:
        return None
    return (f"the served answer differs from transformers' greedy decode at "
            f"{first_differing_token(tokenizer, expected_ids, served_text)}: transformers {expected_text!r}, "
            f"served {served_text!r}")


# ------------------------------------------------------------------------------------------------- entry


def check_servable(model_dir: Path, *, serving_venv: Path | None = None, vllm: bool = True) -> ServeCheckReport:
    """Run every check on a saved checkpoint folder; nothing is raised for a failed check (see ``require``)."""
    from vocadapt.platform.model_loading import check_model_folder, load_checkpoint_tokenizer

    model_dir = Path(model_dir)
    # safetensors only, no custom code, files intact; rows and ids are this report's own findings
    check_model_folder(model_dir, what="model to register", rows=False)
    report = ServeCheckReport(str(model_dir))
    try:
        config, text_config = _text_config(model_dir)
        tokenizer = load_checkpoint_tokenizer(model_dir)
    except (OSError, ValueError, KeyError) as error:
        report.findings.append(Finding("loads", "fail", f"config or tokenizer cannot be loaded: {error}"))
        return report
    shapes = _tensor_shapes(model_dir)
    report.findings += check_rows(model_dir, config, text_config, tokenizer, shapes)
    report.findings.append(check_head(model_dir, text_config, shapes))
    cases = probe_cases(tokenizer)
    report.findings.append(check_decoding_here(tokenizer, cases))
    if vllm and not report.passed:  # refused already: starting vLLM's Python (a minute on 2 cores) changes nothing
        report.findings.append(Finding("decode (vLLM)", "skipped", "not run: the checks above failed"))
    elif vllm:
        report.findings.append(check_decoding_vllm(model_dir, tokenizer, cases, serving_venv))
    return report


def require(report: ServeCheckReport, name: str) -> None:
    """Raise NotServableError naming every failed check; the caller has logged the report first."""
    if report.passed:
        return
    reasons = "\n  - ".join(f"{f.check}: {f.detail}" for f in report.failures)
    raise NotServableError(f"{name} is not registered: {report.model_dir} would not serve as trained:\n  - {reasons}"
                           "\nFix the checkpoint (resize the embeddings to the tokenizer, save the head as the config "
                           "says, or fix the tokenizer's decoding) and register it again.")
