"""Run llama.cpp's own ``convert_hf_to_gguf.py`` (from the llama-cpp-python source distribution) in a process of
its own, with its own ``gguf-py`` first on the path: the converter needs that copy, which is newer than PyPI's
``gguf`` of the same version number.

Two commands, each printing one JSON line:

``plan CONVERTER MODEL``
    the model's architecture, whether llama.cpp converts it, the tokenizer kind the converter will read and the
    pre-tokenizer name llama.cpp's own table gives the tokenizer (null when the table does not know it).
``convert CONVERTER MODEL OUTFILE OUTTYPE NEEDS_PRE [PRE]``
    plans as above, then writes OUTFILE unless the plan refuses (an architecture llama.cpp does not convert, or,
    when NEEDS_PRE is 1, a pre-tokenizer neither llama.cpp's table nor PRE names); PRE is the name to write when
    the converter's table does not know this vocabulary (an adapted vocabulary always has new ids, so its
    fingerprint is new even when its pre-tokenizer is the source's).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _import_converter(converter: Path):
    if str(converter) in sys.path:
        from conversion import base

        return sys.modules["conversion"], base
    sys.path[:0] = [str(converter), str(converter / "gguf-py")]
    import conversion  # noqa: F401 (llama.cpp's converter package, on the path only in this process)
    from conversion import base

    return conversion, base


def _pre_by_table(base, model: Path) -> tuple[str | None, str]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model))
    try:
        return base.TextModel.get_vocab_base_pre(_Quiet(), tokenizer), ""
    except NotImplementedError as error:
        return None, str(error)


class _Quiet:
    """Stands in for the converter's ``self`` in ``get_vocab_base_pre``, which reads nothing from it."""


def plan(converter: Path, model: Path) -> dict:
    conversion, base = _import_converter(converter)
    hparams = base.ModelBase.load_hparams(model, False)
    architecture = conversion.get_model_architecture(hparams, conversion.ModelType.TEXT)
    try:
        conversion.get_model_class(architecture, mmproj=False)
        supported = True
    except NotImplementedError:
        supported = False
    kind = "sentencepiece" if (model / "tokenizer.model").is_file() else "tokenizer.json"
    pre, why = _pre_by_table(base, model) if (model / "tokenizer.json").is_file() else (None, "")
    return {"architecture": architecture, "supported": supported, "tokenizer_file": kind, "pre": pre,
            "pre_error": why}


def convert(converter: Path, model: Path, outfile: Path, outtype: str, needs_pre: bool, pre: str | None) -> dict:
    found = plan(converter, model)
    if not found["supported"] or (needs_pre and not (found["pre"] or pre)):
        return {**found, "written": False}
    _, base = _import_converter(converter)
    if pre:
        original = base.TextModel.get_vocab_base_pre

        def get_vocab_base_pre(self, tokenizer):
            try:
                return original(self, tokenizer)
            except NotImplementedError:
                return pre

        base.TextModel.get_vocab_base_pre = get_vocab_base_pre
    sys.argv = ["convert_hf_to_gguf.py", str(model), "--outfile", str(outfile), "--outtype", outtype]
    import convert_hf_to_gguf

    convert_hf_to_gguf.main()
    return {**found, "written": True}


def main(argv: list[str]) -> None:
    command, converter, model, *rest = argv
    if command == "plan":
        result = plan(Path(converter), Path(model))
    else:
        outfile, outtype, needs_pre, *pre = rest
        result = convert(Path(converter), Path(model), Path(outfile), outtype, needs_pre == "1",
                         pre[0] if pre else None)
    print("VOCADAPT_RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
