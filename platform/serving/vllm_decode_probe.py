"""Run by the vLLM serving environment's Python (never imported by vocadapt): how vLLM itself tokenizes and
detokenizes a checkpoint's probe set.

Reads ``{"folder": ..., "cases": [{"text", "prompt_ids", "output_ids"}]}`` as JSON on stdin and writes, per case,
what vLLM's tokenizer encodes ``text`` to, what it decodes the whole sequence to, and the completion text vLLM's own
engine detokenizer (``IncrementalDetokenizer.from_new_request``: ``DecodeStream`` for fast tokenizers, the slow
incremental path otherwise) streams for ``output_ids`` after ``prompt_ids``, with the server's defaults
(``skip_special_tokens=True``). Only the standard library and vLLM are imported: vocadapt is not installed there.

With ``--serve`` it answers one request per stdin line, each on one stdout line, until stdin closes: vLLM is
imported once (about a minute of a loaded 2-core machine) and each request is probed in a child forked after the
imports, so it meets vLLM as a fresh process would (nothing cached from an earlier request's folder).
"""

from __future__ import annotations

import json
import sys
import types


def probe(request: dict) -> dict:
    from vllm.sampling_params import SamplingParams
    from vllm.tokenizers import get_tokenizer
    from vllm.v1.engine.detokenizer import IncrementalDetokenizer

    tokenizer = get_tokenizer(request["folder"], trust_remote_code=False)
    results, detokenizer = [], None
    for case in request["cases"]:
        # The detokenizer reads only these fields of an engine request.
        engine_request = types.SimpleNamespace(
            request_id="probe", prompt_token_ids=list(case["prompt_ids"]), prompt_embeds=None,
            sampling_params=SamplingParams(max_tokens=max(1, len(case["output_ids"])), skip_special_tokens=True))
        detokenizer = IncrementalDetokenizer.from_new_request(tokenizer, engine_request)
        detokenizer.update(list(case["output_ids"]), False)
        results.append({
            "encode": list(tokenizer.encode(case["text"], add_special_tokens=False)),
            "decode": tokenizer.decode(list(case["prompt_ids"]) + list(case["output_ids"]), skip_special_tokens=True),
            "prompt_decode": tokenizer.decode(list(case["prompt_ids"]), skip_special_tokens=True),
            "completion": detokenizer.get_next_output_text(True, False),
        })
    return {"detokenizer": type(detokenizer).__name__, "results": results}


def serve() -> None:
    """Answer each stdin line (a request) with one stdout line: the report, or ``{"error": traceback}``."""
    import os
    import traceback

    import vllm.sampling_params  # noqa: F401  (the imports every request needs, paid once)
    import vllm.tokenizers  # noqa: F401
    import vllm.v1.engine.detokenizer  # noqa: F401

    for line in sys.stdin:
        if not line.strip():
            continue
        read, write = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(read)
            try:
                answer = json.dumps(probe(json.loads(line)))
            except BaseException:  # the parent reports it as the check's failure
                answer = json.dumps({"error": traceback.format_exc()[-3000:]})
            with os.fdopen(write, "w", encoding="utf-8") as out:
                out.write(answer)
            os._exit(0)
        os.close(write)
        with os.fdopen(read, encoding="utf-8") as source:
            answer = source.read()
        os.waitpid(child, 0)
        sys.stdout.write((answer or json.dumps({"error": "the probe's child process wrote nothing"})) + "\n")
        sys.stdout.flush()


def main() -> None:
    if "--serve" in sys.argv[1:]:
        serve()
    else:
        json.dump(probe(json.load(sys.stdin)), sys.stdout)


if __name__ == "__main__":
    main()
