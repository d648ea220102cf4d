"""A trained sentencepiece model as a ``tokenizers.Tokenizer`` (Gemma's layout: no dummy prefix, byte fallback).

sentencepiece does the training (it is the reference implementation of both BPE and unigram with byte fallback);
the ``tokenizers`` library does the encoding, so that the result is a fast tokenizer transformers loads offline.
BPE pieces carry no merges: a merge's priority is the score of the piece it builds, highest first (SAVA's Minerva
and "Design choices" §3.1 both rely on sentencepiece scores as the priority).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

from vocadapt.components.tokenizers._backend import METASPACE

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def merges_from_scores(
    vocab: Mapping[str, int], scores: Mapping[str, float], skip: Collection[str] = ()
) -> list[tuple[str, str]]:
    """BPE merges for a vocabulary whose priorities are piece scores (sentencepiece BPE).

    Every split of a piece into two pieces of the vocabulary is a merge with the piece's score; merges are ordered
    by score (highest first), then by the lengths and ids of their parts, so the order is deterministic.
    """
    skip = set(skip)
    merges: list[tuple[float, int, int, int, int, str, str]] = []
    for piece, score in scores.items():
        if piece in skip:
            continue
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in vocab and right in vocab and left not in skip and right not in skip:
                merges.append((-score, len(left), len(right), vocab[left], vocab[right], left, right))
    merges.sort()
    return [(left, right) for *_, left, right in merges]


def metaspace_pipeline(tokenizer: Tokenizer) -> None:
    """Gemma-style text handling: space -> '▁', split before each '▁', no dummy prefix, byte fallback on decode.

    No prefix space is invented, so ``decode(encode(x)) == x`` for every string x.
    """
    tokenizer.normalizer = normalizers.Replace(Regex(" "), METASPACE)
    tokenizer.pre_tokenizer = pre_tokenizers.Split(METASPACE, behavior="merged_with_next")
    tokenizer.decoder = decoders.Sequence(
        [decoders.Replace(METASPACE, " "), decoders.ByteFallback(), decoders.Fuse()]
    )


def tokenizer_from_spm_proto(proto) -> Tokenizer:  # proto: sentencepiece_model_pb2.ModelProto
    """Build the fast tokenizer for a trained sentencepiece model (BPE or unigram)."""
    pieces = [(piece.piece, piece.score, piece.type) for piece in proto.pieces]
    unk_id = next(index for index, (_, _, kind) in enumerate(pieces) if kind == UNKNOWN)
    byte_fallback = any(kind == BYTE for _, _, kind in pieces)
    if proto.trainer_spec.model_type == 1:  # unigram
        model = models.Unigram([(piece, score) for piece, score, _ in pieces], unk_id, byte_fallback)
    else:
        vocab = {piece: index for index, (piece, _, _) in enumerate(pieces)}
        skip = {piece for piece, _, kind in pieces if kind != NORMAL}
        scores = {piece: score for piece, score, kind in pieces if kind == NORMAL}
        model = models.BPE(
            vocab,
            merges_from_scores(vocab, scores, skip),
            unk_token=pieces[unk_id][0],
            fuse_unk=True,
            byte_fallback=byte_fallback,
        )
    tokenizer = Tokenizer(model)
    metaspace_pipeline(tokenizer)
    tokenizer.add_special_tokens(
        [AddedToken(piece, special=True, normalized=False) for piece, _, kind in pieces if kind in (UNKNOWN, CONTROL)]
    )
    user_defined = [AddedToken(piece, normalized=False) for piece, _, kind in pieces if kind == USER_DEFINED]
    if user_defined:
        tokenizer.add_tokens(user_defined)
    return tokenizer
