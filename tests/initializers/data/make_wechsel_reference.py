"""Writes the WECHSEL reference for tests/initializers/test_wechsel.py: rows produced by the authors' package
``wechsel`` 0.0.4 (``WECHSEL(...).apply``, defaults neighbors=10, temperature=0.1) on a tiny case.

Outputs, next to this script:

- ``wechsel_source.bin``, ``wechsel_target.bin``: tiny fastText models (dim 16, 1,000 buckets) made here with
  ``fasttext`` (fasttext-numpy2) from the ASCII English and Italian lines below (see ``word_model``);
- ``wechsel_dictionary.txt``: a tiny English<TAB>Italian dictionary;
- ``wechsel_reference.json``: both tokenizers (tokenizer.json), the source matrix and the authors' target matrix,
  with the ids the authors found no vector for.

Not run by the tests; run it by hand (the wheel's ``wechsel/__init__.py`` is byte-identical to CPJKU/wechsel
@ 395e3d4, the snapshot the specification was read at):

    pip download --no-deps wechsel==0.0.4 -d /tmp/wechsel_ref
    mkdir -p /tmp/wechsel_ref/site && unzip -o /tmp/wechsel_ref/wechsel-0.0.4-py3-none-any.whl -d /tmp/wechsel_ref/site
    PYTHONPATH=/tmp/wechsel_ref/site .venv/bin/python tests/initializers/data/make_wechsel_reference.py

The package imports gensim at the top for its Word2Vec path; gensim is not installed here and that path is not
used (fastText models only), so an empty stand-in module is put in ``sys.modules`` first. The corpora are ASCII so
that no token decodes to U+FFFD, where vocadapt deliberately reads a token's word differently (see wechsel.py).
"""

import json
import random
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

gensim, gensim_models = types.ModuleType("gensim"), types.ModuleType("gensim.models")
gensim_models.Word2Vec = type("Word2Vec", (), {})  # only used in an isinstance check
gensim.models = gensim_models
sys.modules.update({"gensim": gensim, "gensim.models": gensim_models})

import fasttext  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402
from wechsel import WECHSEL, get_subword_embeddings_in_word_embedding_space  # noqa: E402

HERE = Path(__file__).parent
ENGLISH = [
    "the cat sleeps on the chair and the dog runs to the house",
    "the city is beautiful and the people eat bread with coffee",
    "today the weather is good so we walk along the river",
    "we read books in the morning and write letters in the evening",
    "the small model learns the language of the city quickly",
    "our family prefers the italian kitchen and the old bread",
    "the water of the sea is cold and the sun is warm",
    "my brother and my sister live in a big house near the church",
]
ITALIAN = [
    "il gatto dorme sulla sedia e il cane corre verso la casa",
    "la gente mangia il pane con il latte nella piazza della chiesa",
    "oggi il tempo buono quindi camminiamo lungo il fiume",
    "leggiamo libri la mattina e scriviamo lettere la sera",
    "il modello piccolo impara la lingua della gente velocemente",
    "la nostra famiglia preferisce la cucina italiana e il pane vecchio",
    "l acqua del mare fredda e il sole caldo",
    "mio fratello e mia sorella vivono in una grande casa vicino alla chiesa",
]
DICTIONARY = [
    ("cat", "gatto"), ("dog", "cane"), ("house", "casa"), ("chair", "sedia"), ("bread", "pane"),
    ("church", "chiesa"), ("river", "fiume"), ("morning", "mattina"), ("evening", "sera"), ("books", "libri"),
    ("letters", "lettere"), ("language", "lingua"), ("family", "famiglia"), ("kitchen", "cucina"),
    ("sea", "mare"), ("sun", "sole"), ("brother", "fratello"), ("sister", "sorella"), ("cold", "fredda"),
    ("warm", "caldo"), ("water", "acqua"), ("small", "piccolo"), ("big", "grande"), ("today", "oggi"),
    ("people", "gente"), ("old", "vecchio"), ("model", "modello"), ("quickly", "velocemente"),
]


def lines(sentences, count, seed):
    rng = random.Random(seed)
    words = " ".join(sentences).split()
    return [" ".join(rng.choice(sentences).split()[: rng.randint(5, 13)] + rng.sample(words, 3)) for _ in range(count)]


def tokenizer(corpus, vocab_size):
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>", "<pad>"], show_progress=False)
    backend.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                   pad_token="<pad>")


def word_model(corpus, out, seed):
    """A tiny fastText model: its vocabulary and n-gram buckets come from skip-gram training on the lines, its
    input vectors (words and n-grams) are then replaced by Gaussian ones. Trained vectors of a few hundred lines
    point almost the same way (cosines of 0.98 to 0.9999 between any two tokens), so the top 10 would be decided
    by rounding; random n-gram vectors keep tokens that share n-grams close and the others apart.
    fasttext-numpy2 0.10.4 sometimes stopped with "Encountered NaN" here, so training is retried: with one thread it
    leaves nine tenths of its input matrix as allocated (``fasttext_helper.zero_filled_allocations``, which this
    script, kept as the reference was made, does not use)."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as handle:
        handle.write("\n".join(corpus) + "\n")
        handle.flush()
        for _ in range(20):
            try:
                model = fasttext.train_unsupervised(handle.name, model="skipgram", dim=16, epoch=5, minCount=1,
                                                    minn=3, maxn=5, bucket=1000, thread=1, verbose=0)
                break
            except RuntimeError:
                continue
    rows = np.random.RandomState(seed).normal(size=model.get_input_matrix().shape)
    model.set_matrices(rows.astype(np.float32), model.get_output_matrix())
    model.save_model(str(out))
    return fasttext.load_model(str(out))


english, italian = lines(ENGLISH, 400, seed=1), lines(ITALIAN, 400, seed=2)
source_tokenizer, target_tokenizer = tokenizer(english, 160), tokenizer(italian, 170)
source_model = word_model(english, HERE / "wechsel_source.bin", seed=1)
target_model = word_model(italian, HERE / "wechsel_target.bin", seed=2)
(HERE / "wechsel_dictionary.txt").write_text("".join(f"{en}\t{it}\n" for en, it in DICTIONARY), encoding="utf-8")
source_matrix = np.random.RandomState(2022).normal(size=(len(source_tokenizer), 8)).astype(np.float32)

target_matrix, info = WECHSEL(source_model, target_model, bilingual_dictionary=str(HERE / "wechsel_dictionary.txt")
                              ).apply(source_tokenizer, target_tokenizer, source_matrix)
# Byte-level BPE has "m" and "Gm" (word start) for one word, so two source tokens often share a vector: where the
# 10th and 11th best similarities are equal, which of them makes the top 10 is up to the sort (np.argpartition
# here, torch.topk in vocadapt), and the rows legitimately differ. Those target ids are listed for the test.
aligner = WECHSEL(source_model, target_model, bilingual_dictionary=str(HERE / "wechsel_dictionary.txt"))
source_vectors = aligner.source_transform(get_subword_embeddings_in_word_embedding_space(
    source_tokenizer, aligner.source_embeddings, verbose=False)[0])
target_vectors = get_subword_embeddings_in_word_embedding_space(target_tokenizer, aligner.target_embeddings,
                                                                verbose=False)[0]
similarity = (target_vectors / (np.linalg.norm(target_vectors, axis=1, keepdims=True) + 1e-8)) @ (
    source_vectors / (np.linalg.norm(source_vectors, axis=1, keepdims=True) + 1e-8)).T
ranked = -np.sort(-similarity, axis=1)
tied_at_boundary = np.flatnonzero(np.abs(ranked[:, 9] - ranked[:, 10]) < 1e-6).tolist()
not_found = sorted(target_tokenizer.convert_tokens_to_ids(info.not_found))
copied_specials = sorted({target_tokenizer.vocab[t] for t in source_tokenizer.special_tokens_map.values()
                          if t in target_tokenizer.vocab})
out = HERE / "wechsel_reference.json"
out.write_text(json.dumps({
    "wechsel": "0.0.4 (CPJKU/wechsel @ 395e3d4), WECHSEL.apply defaults: neighbors=10, temperature=0.1",
    "source_tokenizer": json.loads(source_tokenizer.backend_tokenizer.to_str()),
    "target_tokenizer": json.loads(target_tokenizer.backend_tokenizer.to_str()),
    "source_matrix": source_matrix.tolist(), "target_matrix": np.asarray(target_matrix).tolist(),
    "not_found": not_found, "copied_specials": copied_specials, "tied_at_boundary": tied_at_boundary,
}) + "\n")
print(f"wrote {out}: {len(target_tokenizer)} target tokens, {len(not_found)} without a vector, "
      f"{len(copied_specials)} special rows copied, {len(tied_at_boundary)} tied at the 10th neighbour")
