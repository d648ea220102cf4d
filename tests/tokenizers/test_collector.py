"""``components/collector.py``: the cyclic garbage collector paused around a block and restored as it was, whatever
the block does; ``parse_json`` parses as ``json.loads`` does, errors included."""

from __future__ import annotations

import gc
import json

import pytest

from vocadapt.components.collector import collector_paused, parse_json


def test_the_collector_is_off_inside_and_back_on_after_a_return_or_an_error():
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("inside")
    assert gc.isenabled()


def test_a_collector_already_off_stays_off():
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_parse_json_reads_what_json_loads_reads_and_fails_as_it_does():
    document = json.dumps({"model": {"type": "BPE", "vocab": {f"piece{index}": index for index in range(5000)},
                                     "merges": [["a", f"b{index}"] for index in range(5000)]},
                           "added_tokens": [{"id": 0, "content": "<s>", "special": True}], "score": -1.5e-3})
    assert parse_json(document) == json.loads(document)
    assert parse_json(document.encode("utf-8")) == json.loads(document)
    with pytest.raises(json.JSONDecodeError) as raised:
        parse_json('{"model": {"vocab": {"a": 1,}}}')
    assert (raised.value.lineno, raised.value.colno) == (1, 29)
    assert gc.isenabled()
