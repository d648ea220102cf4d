"""WECHSEL (Minixhofer, Paischer and Rekabsaz, NAACL 2022): fastText word vectors of the source and the target
language, aligned by orthogonal Procrustes on a bilingual dictionary, give every token a vector in one space; a new
token's row is the softmax-weighted mean of the source rows of its nearest source tokens
(recovery-and-new-initialisers §3; the authors' ``wechsel`` 0.0.4, ``WECHSEL.apply``).

Ported from the authors' code, batched: one (N, V_source) similarity product per chunk of new tokens and one
``embedding_bag`` instead of a loop over tokens. Where it differs, on purpose:

- A token's word is its canonical bytes decoded with incomplete UTF-8 sequences dropped (``Ġcitt\\xc3`` -> ``citt``),
  then stripped, where the authors use ``tokenizer.decode(i).strip()``: the same word for every token that is valid
  UTF-8, and no ``U+FFFD`` word shared by every partial-byte token.
- Shared tokens keep their source rows (the surgery copies them, as for every method); WECHSEL recomputes them.
- A new token without a vector gets a row from N(mu, sigma^2) drawn from the run's seeded generator (the authors
  draw from ``RandomState(1234)``), column by column (``columnwise_gaussian_rows``).

Registered ``columnwise``: the neighbours and weights come from the word vectors alone, so column j of every row is
a weighted sum of column j of source rows, and checkpoint surgery streams it a column block at a time (the
neighbour search runs once, for the first block, and is reused by the others and by the LM head).
- fastText models of different dimensions are refused (the authors reduce the source model, even when the target
  is the larger one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from vocadapt.components.errors import UserError
from vocadapt.components.initializers import InitProblem, register_initializer
from vocadapt.components.initializers._common import (
    SIMILARITY_CHUNK_ROWS, gathered_rows, ids_key,
)
from vocadapt.components.initializers.fvt import UNSEEN_RULES, unseen_rows
from vocadapt.components.last_result_cache import LastResultCache

# The value of the three file options that the platform replaces with the files `vocadapt assets` builds.
EMBEDDED = "embedded"
_NEIGHBOURS = LastResultCache()
SIMILARITY_FLOATS = 1 << 26


def token_words(tokenizer: Any, count: int) -> list[str]:
    """The word fastText is asked about for each of the first ``count`` ids ("" for none): the token's text with
    its word-start space and surrounding whitespace stripped, incomplete UTF-8 dropped."""
    from vocadapt.components.tokenizers.canonical import canonical_tokens

    forms = canonical_tokens(tokenizer)
    words = []
    for token_id in range(count):
        form = forms[token_id] if token_id < len(forms) else None
        words.append("" if form is None else form.data.decode("utf-8", errors="ignore").strip())
    return words


def word_vectors(model: Any, words: list[str]) -> torch.Tensor:
    """(len(words), d) float64 fastText vectors (from the word and its character n-grams); zero rows for "" and
    for words fastText cannot build a vector for."""
    vectors = np.zeros((len(words), model.get_dimension()), dtype=np.float64)
    for index, word in enumerate(words):
        if word:
            vectors[index] = model.get_word_vector(word)
    return torch.from_numpy(vectors)


def read_dictionary(path: Path) -> list[tuple[str, str]]:
    """(source word, target word) pairs, one per line: tab-separated, or two whitespace-separated words (the
    authors' format); blank lines and lines with another shape are skipped."""
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.strip().split("\t") if "\t" in line else line.split()
        if len(parts) == 2 and parts[0].strip() and parts[1].strip():
            pairs.append((parts[0].strip(), parts[1].strip()))
    return pairs


def dictionary_vectors(source_model: Any, target_model: Any, pairs: list[tuple[str, str]]
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """The aligned rows Procrustes fits on: each pair tried as written, lower-cased and title-cased on each side,
    kept where both variants are words of their model's vocabulary (duplicates kept, as in the authors' code).
    Returns (P, d) float64 source vectors and (P, d) target vectors."""
    source_rows, target_rows = [], []
    for source_word, target_word in pairs:
        for source_variant in (source_word, source_word.lower(), source_word.title()):
            if source_model.get_word_id(source_variant) == -1:
                continue
            for target_variant in (target_word, target_word.lower(), target_word.title()):
                if target_model.get_word_id(target_variant) != -1:
                    source_rows.append(source_model.get_word_vector(source_variant))
                    target_rows.append(target_model.get_word_vector(target_variant))
    dimension = source_model.get_dimension()
    if not source_rows:
        return torch.zeros(0, dimension, dtype=torch.float64), torch.zeros(0, dimension, dtype=torch.float64)
    return torch.from_numpy(np.stack(source_rows).astype(np.float64)), torch.from_numpy(
        np.stack(target_rows).astype(np.float64))


def orthogonal_procrustes(source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """(d, d) orthogonal R minimising ||source @ R - target||_F, no centring (``scipy.linalg.orthogonal_procrustes``):
    with U S V^T the SVD of source^T target, R = U V^T."""
    u, _, vh = torch.linalg.svd(source.T @ target)
    return u @ vh


def nearest_source_tokens(queries: torch.Tensor, keys: torch.Tensor, neighbors: int, temperature: float
                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """For each query, the ``neighbors`` keys of largest cosine and their softmax(cosine / temperature) weights.

    queries: (N, d); keys: (V, d); both L2-normalised here, similarities in float32. Returns indices (N, k) int64 and
    weights (N, k) float32. Queries go in chunks whose (chunk, V) similarities stay under 2^26 floats (256 MB: 512
    queries against a 128K-token source vocabulary).
    """
    k = min(neighbors, keys.shape[0])
    unit_keys = torch.nn.functional.normalize(keys.float(), dim=1)
    indices = torch.zeros(queries.shape[0], k, dtype=torch.long)
    weights = torch.zeros(queries.shape[0], k, dtype=torch.float32)
    rows = max(1, min(SIMILARITY_CHUNK_ROWS, SIMILARITY_FLOATS // max(1, keys.shape[0])))
    for start in range(0, queries.shape[0], rows):
        chunk = slice(start, start + rows)
        similarity = torch.nn.functional.normalize(queries[chunk].float(), dim=1) @ unit_keys.T
        top = torch.topk(similarity, k, dim=1)
        indices[chunk], weights[chunk] = top.indices, torch.softmax(top.values / temperature, dim=1)
    return indices, weights


def _load_fasttext(path: Path, option: str) -> Any:
    import fasttext

    try:
        return fasttext.load_model(str(path))
    except ValueError as error:
        raise UserError(f"wechsel option {option}: {path} is not a fastText model ({error}); give a .bin file "
                        "written by fastText (such as cc.en.300.bin)") from error


def _existing(value: str, option: str) -> Path:
    if value == EMBEDDED:
        raise UserError(
            f"wechsel option {option} is {EMBEDDED!r}, which `vocadapt adapt` resolves to the files `vocadapt assets` "
            f"builds; here give the file itself (e.g. --option {option}=PATH)"
        )
    path = Path(value).expanduser()
    if not path.is_file():
        raise UserError(f"wechsel option {option}: {path} does not exist; give an existing file")
    return path


def wechsel_neighbours(problem: InitProblem, source_vectors: str, target_vectors: str, dictionary: str,
                       neighbors: int, temperature: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The role-independent part: for each new token, its nearest source tokens and their weights.

    Returns indices (M, k) into the source ids, weights (M, k) and has_vector (N,) bool (M = has_vector.sum()).
    """
    source_path = _existing(source_vectors, "source_vectors")
    target_path = _existing(target_vectors, "target_vectors")
    dictionary_path = _existing(dictionary, "dictionary")
    source_model = _load_fasttext(source_path, "source_vectors")
    target_model = _load_fasttext(target_path, "target_vectors")
    if source_model.get_dimension() != target_model.get_dimension():
        raise UserError(
            f"wechsel: source_vectors has dimension {source_model.get_dimension()} and target_vectors "
            f"{target_model.get_dimension()}; give fastText models of one dimension (fasttext.util.reduce_model "
            "reduces the larger one)"
        )
    source_dictionary, target_dictionary = dictionary_vectors(source_model, target_model,
                                                              read_dictionary(dictionary_path))
    if source_dictionary.shape[0] == 0:
        raise UserError(
            f"wechsel option dictionary: no pair of {dictionary_path} has both words in the fastText vocabularies "
            f"of {source_path.name} and {target_path.name}; give a dictionary of the two models' languages "
            "(source word, tab, target word per line)"
        )
    rotation = orthogonal_procrustes(source_dictionary, target_dictionary)
    candidates = min(len(problem.source_tokenizer), problem.source_matrix.shape[0])
    source_words = word_vectors(source_model, token_words(problem.source_tokenizer, candidates)) @ rotation
    target_words = token_words(problem.target_tokenizer, int(problem.new_target_ids.max()) + 1)
    queries = word_vectors(target_model, [target_words[i] for i in problem.new_target_ids.tolist()])
    has_vector = queries.abs().sum(1) > 0
    indices, weights = nearest_source_tokens(queries[has_vector], source_words, neighbors, temperature)
    return indices, weights, has_vector


@register_initializer("wechsel", columnwise=True)
def wechsel(
    problem: InitProblem,
    *,
    source_vectors: str = EMBEDDED,
    target_vectors: str = EMBEDDED,
    dictionary: str = EMBEDDED,
    neighbors: int = 10,
    temperature: float = 0.1,
    unseen: str = "random",
) -> torch.Tensor:
    """(N, hidden): row i = sum_j softmax(cos(t_i, s_j R) / temperature)_j * source row of s_j over the
    ``neighbors`` source tokens s_j nearest to new token i, where t and s are fastText vectors of the tokens' words
    in the target and source language and R the orthogonal Procrustes map fitted on the dictionary's pairs.

    source_vectors, target_vectors: fastText ``.bin`` models of the source and the target language (the published
        cc.en.300.bin and cc.it.300.bin work); 'embedded': the small ones `vocadapt assets` trains on the embedded
        corpora, resolved by the platform.
    dictionary: bilingual word pairs, one "source<TAB>target" per line (WECHSEL's dicts/data format); 'embedded':
        the one `vocadapt assets` builds from Debian's FreeDict packages.
    neighbors, temperature: the authors' defaults (10 and 0.1).
    unseen: the row of a new token without a vector: "random" (the authors': N(mu, sigma^2)) or "fvt" (its FVT
        row). On the demo 23 of 13,311 new tokens have none, and their random draw alone moved Italian zero-shot
        bits per byte by 0.36 (BENCHMARKS.md, "WECHSEL and OMP in the quality table").
    Every source token is a candidate. The neighbours and weights read no source row, so an untied model's LM head
    reuses the input embeddings' and applies them to the head's own source rows.
    """
    if neighbors < 1 or temperature <= 0 or unseen not in UNSEEN_RULES:
        raise ValueError(f"wechsel needs neighbors >= 1, temperature > 0 and unseen {'|'.join(UNSEEN_RULES)}, got "
                         f"{neighbors}, {temperature} and {unseen!r}")
    hidden = problem.source_matrix.shape[1]
    if len(problem.new_target_ids) == 0:
        return torch.zeros(0, hidden, dtype=torch.float32)

    def compute() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return wechsel_neighbours(problem, source_vectors, target_vectors, dictionary, neighbors, temperature)

    key = (ids_key(problem.new_target_ids), source_vectors, target_vectors, dictionary, neighbors, temperature,
           min(len(problem.source_tokenizer), problem.source_matrix.shape[0]))
    indices, weights, has_vector = _NEIGHBOURS.get((problem.source_tokenizer, problem.target_tokenizer), key, compute)
    rows = torch.empty(len(problem.new_target_ids), hidden, dtype=torch.float32)
    if bool(has_vector.any()):
        neighbour_rows, index = gathered_rows(problem, indices)  # only the neighbours' rows, in float32
        rows[has_vector] = torch.nn.functional.embedding_bag(index, neighbour_rows, per_sample_weights=weights,
                                                             mode="sum")
    if not bool(has_vector.all()):
        rows[~has_vector] = unseen_rows(problem, ~has_vector, unseen)
    return rows
