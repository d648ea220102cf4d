"""Run by the vLLM serving environment's Python (never imported by vocadapt): how vLLM itself tokenizes and
detokenizes a checkpoint's probe set.

Reads ``{"folder": ..., "cases": [{"text", "prompt_ids", "output_ids"}]}`` as JSON on stdin and writes, per case,
what vLLM's tokenizer encodes ``text`` to, what it decodes the whole sequence to, and the completion text vLLM's own
engine detokenizer (``IncrementalDetokenizer.from_new_request``: ``DecodeStream`` for fast tokenizers, the slow
incremental path otherwise) streams for ``output_ids`` after ``prompt_ids``, with the server's defaults
(``skip_special_tokens=True``). Only the standard library and vLLM are imported: vocadapt is not installed there.
"""

from __future__ import annotations

import json
import sys
import types


def main() -> None:
    from vllm.sampling_params import SamplingParams
    from vllm.tokenizers import get_tokenizer
    from vllm.v1.engine.detokenizer import IncrementalDetokenizer

    request = json.load(sys.stdin)
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
    json.dump({"detokenizer": type(detokenizer).__name__, "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
