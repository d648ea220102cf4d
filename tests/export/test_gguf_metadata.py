"""GGUF metadata read key by key (components/export/gguf_metadata.py) gives what the gguf package's GGUFReader
gives, for every value type, in either byte order."""

from __future__ import annotations

import pytest

from vocadapt.components.export.gguf_metadata import gguf_metadata


def _write(path, endian) -> None:
    from gguf import GGUFValueType, GGUFWriter

    writer = GGUFWriter(str(path), "llama", endianess=endian)
    writer.add_string("tokenizer.ggml.model", "gpt2")
    writer.add_array("tokenizer.ggml.tokens", ["<s>", "ciao", "Ġmondo", "▁è", "<0x0A>", ""])
    writer.add_array("tokenizer.ggml.scores", [0.0, -1.5, -2.25, 3.0, 0.5, 1e-3])
    writer.add_array("tokenizer.ggml.token_type", [3, 1, 1, 1, 6, 1])
    writer.add_array("tokenizer.ggml.merges", ["c i", "ci ao"])
    writer.add_uint32("tokenizer.ggml.bos_token_id", 0)
    writer.add_int64("general.some_int64", -(2**40))
    writer.add_uint64("general.some_uint64", 2**63)
    writer.add_float64("general.some_float64", 0.1)
    writer.add_bool("tokenizer.ggml.add_bos_token", True)
    writer.add_int8("general.some_int8", -3)
    writer.add_key_value("general.nested", [[1, 2], [3]], GGUFValueType.ARRAY, sub_type=GGUFValueType.ARRAY)
    writer.add_string("tokenizer.chat_template", "{% for m in messages %}{{ m['content'] }}{% endfor %}")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.mark.parametrize("order", ["little", "big"])
def test_every_key_reads_as_gguf_reader_reads_it(order, tmp_path):
    from gguf import GGUFEndian, GGUFReader

    path = tmp_path / "tiny.gguf"
    _write(path, GGUFEndian.LITTLE if order == "little" else GGUFEndian.BIG)
    fields = GGUFReader(str(path)).fields
    keys = [key for key in fields if not key.startswith("GGUF.")]
    assert len(keys) >= 13
    expected = {key: fields[key].contents() for key in keys}
    assert gguf_metadata(path, keys) == expected
    # a subset, in another order, and a key the file does not hold (left out)
    subset = ["tokenizer.chat_template", "tokenizer.ggml.tokens", "no.such.key"]
    assert gguf_metadata(path, subset) == {key: expected[key] for key in subset[:2]}


def test_a_file_that_is_not_a_gguf_is_refused(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    with pytest.raises(ValueError, match="is not a GGUF file"):
        gguf_metadata(path, ["tokenizer.ggml.tokens"])
