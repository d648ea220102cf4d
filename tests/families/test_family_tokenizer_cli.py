"""``vocadapt tokenizer train --like`` and ``vocadapt tokenizer expand`` on a family folder, as the issue ran them.

The reported case: expanding Llama-3.1 with the top-k tokens of an Italian byte-level BPE wrote a tokenizer whose
256 specials had moved from 128000-128255 to 128000 + k (``<|begin_of_text|>`` 128000 -> 133000 at k = 5,000).
"""

from __future__ import annotations

import itertools
import json

from typer.testing import CliRunner

from vocadapt.cli.app import app
from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer


def test_train_like_and_expand_a_family_folder(family_tokenizers, load_family_tokenizer, embedded_assets, tmp_path):
    corpus = tmp_path / "it.txt"
    with open(embedded_assets.home / "corpora" / "it" / "train.txt", encoding="utf-8") as handle:
        corpus.write_text("".join(itertools.islice(handle, 3000)), encoding="utf-8")
    family = str(family_tokenizers["llama3_1"])
    runner = CliRunner()
    trained = runner.invoke(app, ["tokenizer", "train", "--corpus", str(corpus), "--kind", "bytelevel-bpe",
                                  "--vocab-size", "3000", "--like", family, "--out", str(tmp_path / "target")])
    assert trained.exit_code == 0, trained.output
    source, target = load_family_tokenizer("llama3_1"), load_pretrained_tokenizer(str(tmp_path / "target"))
    assert target.chat_template == source.chat_template
    assert (target.bos_token, target.eos_token) == (source.bos_token, source.eos_token)
    assert target.convert_tokens_to_ids("<|begin_of_text|>") == 0  # like=: the family's specials come first

    expanded = runner.invoke(app, ["tokenizer", "expand", "--source", family, "--target", str(tmp_path / "target"),
                                   "--top-k", "200", "--corpus", str(corpus), "--no-protect-lexicon",
                                   "--out", str(tmp_path / "expanded"), "--json"])  # fmt: skip
    assert expanded.exit_code == 0, expanded.output
    summary = json.loads(expanded.output[expanded.output.index("{"):])
    assert (summary["new_tokens"], summary["unreachable"]) == (200, 0)
    tokenizer = load_pretrained_tokenizer(str(tmp_path / "expanded"))
    added = {t.content: i for i, t in tokenizer.backend_tokenizer.get_added_tokens_decoder().items()}
    assert added == {t.content: i for i, t in source.backend_tokenizer.get_added_tokens_decoder().items()}
    assert (added["<|begin_of_text|>"], added["<|eot_id|>"], tokenizer.bos_token_id) == (128000, 128009, 128000)
    assert tokenizer.convert_ids_to_tokens(128256) not in added and len(tokenizer) == 128256 + 200
