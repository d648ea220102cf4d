"""Train a target tokenizer of any kind real models use, saved so ``AutoTokenizer.from_pretrained`` loads it offline.

Kinds: ``bytelevel-bpe`` (GPT-2 / Llama-3 / SmolLM2 style, ``tokenizers``), ``spm-bpe`` and ``spm-unigram``
(sentencepiece with byte fallback, Gemma layout; "Design choices" §3.1 trains a BPE sentencepiece tokenizer),
``wordpiece`` (BERT-like helper models, ``tokenizers``). Same inputs and seed give byte-identical files.

``like=source_tokenizer`` makes the result able to replace the source's vocabulary: it carries the
source's special and added tokens (at the first ids), bos/eos/pad/unk roles, chat template and bos/eos insertion.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vocadapt.components.errors import UserError
from vocadapt.components.tokenizers._wrap import SpecialTokenPlan, plan_special_tokens, wrap_fast
from vocadapt.components.tokenizers.saving import save_tokenizer

KINDS = ("bytelevel-bpe", "spm-bpe", "spm-unigram", "wordpiece")


class VocabularyNotReached(UserError):
    """The corpus cannot give as many tokens as asked; ``reached`` is how many it gives."""

    def __init__(self, message: str, reached: int):
        super().__init__(message)
        self.reached = reached


def iter_corpus_lines(corpus_files: Sequence[str | Path], max_lines: int | None = None) -> Iterator[str]:
    """Non-empty lines of the files, in order, at most ``max_lines`` of them."""
    missing = [str(path) for path in corpus_files if not Path(path).is_file()]
    if missing:
        raise FileNotFoundError(f"corpus file(s) not found: {', '.join(missing)}; pass existing text files")

    def lines() -> Iterator[str]:
        for path in corpus_files:
            with open(path, encoding="utf-8") as handle:
                try:
                    for line in handle:
                        line = line.rstrip("\n")
                        if line.strip():
                            yield line
                except UnicodeDecodeError:
                    raise not_utf8_error(Path(path)) from None

    return itertools.islice(lines(), max_lines)


def not_utf8_error(path: Path) -> UserError:
    """A UserError naming the file, the line and the byte that is not UTF-8, and the fix."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as error:
                return UserError(
                    f"{path}, line {number}: byte 0x{raw[error.start]:02x} at column {error.start + 1} is not UTF-8; "
                    f"re-encode the file as UTF-8 (e.g. `iconv -f LATIN1 -t UTF-8 {path}`) or remove that line")
    return UserError(f"{path} is not UTF-8; re-encode it as UTF-8 (e.g. `iconv -t UTF-8`)")


def check_corpus_files(corpus_files: Sequence[str | Path], max_lines: int | None = None) -> int:
    """Refuse, before any training, corpus files that are missing, not UTF-8 (naming the file and line) or hold no
    non-empty line at all; returns the number of non-empty lines read (at most ``max_lines``)."""
    count = sum(1 for _ in iter_corpus_lines(corpus_files, max_lines))
    if count == 0:
        names = ", ".join(str(path) for path in corpus_files) or "(no file given)"
        raise UserError(f"corpus {names}: no non-empty line to train a tokenizer on; give UTF-8 text files with "
                        "one document per line")
    return count


@dataclass(frozen=True)
class TokenizerTrainingSpec:
    """The tokenizer to train: its kind (one of ``KINDS``) and total size, what the trainer is told, and the source
    it must be able to replace. The same spec on the same text gives byte-identical files.

    ``like``: a source tokenizer whose special and added tokens (at the first ids), roles, chat template and bos/eos
    settings to carry. ``require_vocab_size``: refuse (``VocabularyNotReached``, nothing written) when the corpus
    cannot reach ``vocab_size``; otherwise the tokenizer is saved with the size reached, ``len(result)``, which the
    caller reports."""

    kind: str
    vocab_size: int  # special tokens included (sentencepiece's 256 byte pieces count too)
    min_frequency: int = 2  # pairs seen fewer times are not merged (tokenizers' trainers)
    special_tokens: Sequence[str] | None = None  # extra special tokens after the kind's (or ``like``'s) own
    max_lines: int | None = None  # train on the first N non-empty lines only
    seed: int = 0  # sentencepiece's only: the other trainers are deterministic
    character_coverage: float | None = None  # sentencepiece's share of characters kept as pieces (None: 0.9995)
    like: Any = None
    require_vocab_size: bool = False


def train_tokenizer(
    corpus_files: Sequence[str | Path],
    spec: TokenizerTrainingSpec,
    out_dir: str | Path,
    *,
    overwrite: bool = False,
    show_progress: bool = True,
):
    """Train a tokenizer on text files and save it to ``out_dir``; returns the loaded fast tokenizer.

    Args:
        corpus_files: UTF-8 text files, one document or paragraph per line.
        spec: the tokenizer to train.
        out_dir: folder to write; it must not exist or be empty unless ``overwrite``.

    Files missing, not UTF-8 or without text are refused before training (a ``UserError`` naming file and line).
    """
    check_corpus_files(corpus_files, spec.max_lines)
    lines = iter_corpus_lines(corpus_files, spec.max_lines)
    return train_tokenizer_from_iterator(
        lines, spec, out_dir, overwrite=overwrite, show_progress=show_progress,
        corpus_name=", ".join(str(path) for path in corpus_files),
    )  # fmt: skip


def train_tokenizer_from_dataset(dataset: Any, spec: TokenizerTrainingSpec, out_dir: str | Path, *,
                                 text_column: str = "text", overwrite: bool = False, show_progress: bool = True):
    """Train on an HF ``datasets.Dataset`` (or any iterable of dicts) column; see :func:`train_tokenizer`."""
    texts = (row[text_column] for row in dataset)
    lines = (text for text in texts if text and text.strip())
    return train_tokenizer_from_iterator(lines, spec, out_dir, overwrite=overwrite, show_progress=show_progress,
                                         corpus_name=f"column {text_column!r} of the dataset")


def train_tokenizer_from_iterator(
    lines: Iterable[str],
    spec: TokenizerTrainingSpec,
    out_dir: str | Path,
    *,
    overwrite: bool = False,
    show_progress: bool = True,
    corpus_name: str = "the corpus",
):
    """Train on an iterable of texts (the first ``spec.max_lines`` of them); see :func:`train_tokenizer`. Writes
    ``out_dir`` atomically; nothing when the texts are empty or (``require_vocab_size``) cannot reach
    ``vocab_size``."""
    kind, vocab_size, like = spec.kind, spec.vocab_size, spec.like
    if kind not in KINDS:
        raise ValueError(f"unknown tokenizer kind {kind!r}; choose one of {', '.join(KINDS)}")
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()) and not overwrite:
        raise FileExistsError(f"{out_dir} exists and is not empty; choose another folder or pass overwrite")
    plan = plan_special_tokens(like, kind, spec.special_tokens)
    check_vocab_size_above_floor(vocab_size, kind, plan, like is not None)
    lines = itertools.islice(lines, spec.max_lines)
    first = next(lines, None)
    if first is None:
        raise UserError(f"{corpus_name}: no non-empty text to train a tokenizer on; give text, one document per line")
    lines = _with_progress(itertools.chain([first], lines), show_progress)
    if kind.startswith("spm"):
        backend = _train_spm(lines, kind, vocab_size, plan, spec.seed, spec.character_coverage)
    elif kind == "wordpiece":
        backend = _train_wordpiece(lines, vocab_size, plan, spec.min_frequency, show_progress)
    else:
        backend = _train_bytelevel(lines, vocab_size, plan, spec.min_frequency, show_progress, like)
    fast = wrap_fast(backend, plan, like)
    if spec.require_vocab_size and len(fast) < vocab_size:
        raise VocabularyNotReached(
            f"{corpus_name} gives only {len(fast):,} {kind} tokens, not {vocab_size:,}, at min frequency "
            f"{spec.min_frequency} (no other piece occurs often enough); nothing was written. Ask for {len(fast):,} "
            "or fewer, lower the min frequency, or add text", reached=len(fast))
    save_atomically(fast, out_dir, overwrite)
    from vocadapt.components.tokenizers.loading import load_pretrained_tokenizer

    return load_pretrained_tokenizer(str(out_dir))


class VocabularyBelowFloor(UserError, ValueError):
    """The vocabulary asked for is no larger than what the kind and ``like`` carry before training anything."""


def vocabulary_floor(kind: str, plan: SpecialTokenPlan) -> int:
    """Tokens every tokenizer of ``kind`` with ``plan``'s specials holds before training: the special and added
    tokens (those carried from ``like`` included), plus sentencepiece's 256 byte pieces."""
    return len(plan.tokens) + (256 if kind.startswith("spm") else 0)


def check_vocab_size_above_floor(vocab_size: int, kind: str, plan: SpecialTokenPlan, carried: bool) -> None:
    """Refuse (``VocabularyBelowFloor``) a ``vocab_size`` at or below :func:`vocabulary_floor`."""
    floor = vocabulary_floor(kind, plan)
    if vocab_size <= floor:  # like=Gemma-3 carries 6,415 added tokens: it needs more than 6,671
        parts = [f"{len(plan.tokens):,} special and added tokens" + (" carried from `like`" if carried else "")]
        parts += ["256 byte pieces"] if kind.startswith("spm") else []
        raise VocabularyBelowFloor(f"vocab_size {vocab_size} is too small for kind {kind!r}: its base alphabet is "
                                   f"{' + '.join(parts)}; raise it above {floor:,}")


def _with_progress(lines: Iterable[str], show_progress: bool) -> Iterator[str]:
    from tqdm.auto import tqdm

    return iter(tqdm(lines, desc="reading corpus", unit=" lines", disable=not show_progress, mininterval=1.0))


def _train_bytelevel(lines, vocab_size: int, plan: SpecialTokenPlan, min_frequency: int, show_progress: bool,
                     like: Any = None):
    """Byte-level BPE; trained ``like`` a byte-level family, it splits text as that family does (its normaliser
    and pre-tokenizer: Llama-3's digit triples and contractions, Qwen's single digits and NFC), so numbers follow
    the family's rule and no target token spans what the family keeps apart."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    family = _byte_level_text_handling(like)
    if family is not None:
        tokenizer.normalizer, tokenizer.pre_tokenizer = family
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=plan.tokens,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=show_progress,
    )  # fmt: skip
    tokenizer.train_from_iterator(lines, trainer=trainer)
    return tokenizer


def _byte_level_text_handling(like: Any):
    """``like``'s normaliser and pre-tokenizer when ``like`` is a byte-level BPE (ends its pre-tokenizer in
    ByteLevel); None otherwise (a sentencepiece or WordPiece source keeps GPT-2's split for a byte-level target)."""
    if like is None or not hasattr(like, "backend_tokenizer"):
        return None
    backend = like.backend_tokenizer
    if backend.pre_tokenizer is None or "ByteLevel" not in backend.pre_tokenizer.__getstate__().decode("utf-8"):
        return None
    return backend.normalizer, backend.pre_tokenizer


def _train_wordpiece(lines, vocab_size: int, plan: SpecialTokenPlan, min_frequency: int, show_progress: bool):
    """WordPiece through a BPE over words marked with a leading '▁', converted afterwards.

    tokenizers' own WordPieceTrainer numbers the '##' alphabet in hash-map order, so two runs on the same corpus
    give different vocabularies (seen: six runs, six vocabularies). BPE over marked words is deterministic and is
    the same algorithm: '▁casa' becomes the word-start piece 'casa', 'sa' the continuation '##sa'.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    marker = "\u2581"
    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=False)
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.BertPreTokenizer(), pre_tokenizers.Metaspace(marker, prepend_scheme="always", split=False)]
    )
    budget = vocab_size - len(plan.tokens)
    trainer = trainers.BpeTrainer(vocab_size=budget, min_frequency=min_frequency, show_progress=show_progress)
    bpe.train_from_iterator(lines, trainer=trainer)
    pieces = [piece for piece, _ in sorted(bpe.get_vocab().items(), key=lambda item: item[1]) if piece != marker]
    wordpiece = [piece[1:] if piece.startswith(marker) else f"##{piece}" for piece in pieces]
    # Every character must also exist as a whole word ('a', not only '##a'), or one-letter words become unk.
    known = set(wordpiece)
    missing = [piece[2:] for piece in wordpiece if piece.startswith("##") and len(piece) == 3 and piece[2:] not in known]
    merged = [piece for piece in wordpiece if len(piece.removeprefix("##")) > 1]
    basics = [piece for piece in wordpiece if len(piece.removeprefix("##")) <= 1] + missing
    vocabulary = list(dict.fromkeys(plan.tokens + basics + merged))[:vocab_size]
    vocab = {piece: token_id for token_id, piece in enumerate(vocabulary)}
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token=plan.roles["unk"]))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=False)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    return tokenizer


def _train_spm(lines, kind: str, vocab_size: int, plan: SpecialTokenPlan, seed: int, coverage: float | None):
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2

    from vocadapt.components.tokenizers._spm import tokenizer_from_spm_proto

    unk = plan.roles.get("unk", "<unk>")
    controls = [token for token in plan.tokens if token != unk]
    unk_id = plan.tokens.index(unk) if unk in plan.tokens else 0  # like=Gemma: <unk> stays at id 3
    spm.set_random_generator_seed(seed)
    model = tempfile.SpooledTemporaryFile()
    spm.SentencePieceTrainer.train(
        sentence_iterator=lines,
        model_writer=model,
        model_type="bpe" if kind == "spm-bpe" else "unigram",
        vocab_size=vocab_size,
        character_coverage=0.9995 if coverage is None else coverage,
        byte_fallback=True,
        unk_id=unk_id, unk_piece=unk, bos_id=-1, eos_id=-1, pad_id=-1,
        control_symbols=controls,
        add_dummy_prefix=False,  # Gemma layout: no invented space, exact round trips
        remove_extra_whitespaces=False,
        normalization_rule_name="identity",
        split_digits=True,
        allow_whitespace_only_pieces=True,
        max_sentence_length=1 << 16,
        shuffle_input_sentence=False,
        hard_vocab_limit=False,
        num_threads=1,  # one thread: the same corpus gives the same model
        minloglevel=2,
    )  # fmt: skip
    model.seek(0)
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model.read())
    return tokenizer_from_spm_proto(proto)


def save_atomically(tokenizer, out_dir: str | Path, overwrite: bool = False) -> None:
    """``save_pretrained`` into a staging folder beside ``out_dir``, then rename: never a half-written folder."""
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()) and not overwrite:
        raise FileExistsError(f"{out_dir} exists and is not empty; choose another folder or pass overwrite")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        save_tokenizer(tokenizer, staging)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
