"""ALM, approximate likelihood matching (Minixhofer, Vulić, Ponti, NeurIPS 2025; arXiv 2503.20083), in PyTorch.

Distils a teacher into a student that uses another tokenizer. Both tokenize the same text; the text is cut into
**chunks**, the shortest byte spans that both tokenizations cover exactly (a chunk closes wherever both have a
token boundary). A chunk's likelihood is the product of its tokens' probabilities, so teacher and student assign
comparable numbers to it although their tokens differ. The student learns to match the teacher's chunk
likelihoods through a binarised f-divergence. With the source model as the teacher and the adapted model as the
student, this is tokenizer transfer by self-distillation.

The defaults follow the authors' code (tokenkit, ``training/losses.py::compute_alm_loss``), the recommended
``merge_by_space_prob+append_space`` mode:

- **Debiasing.** A chunk that ends inside a word tells the student something about the text that follows (the
  next token must continue the word), and the two tokenizers leak differently. Consecutive chunks are merged into
  groups that end where the *teacher* gives more than ``threshold`` (0.1) probability to starting a new word next
  (a token that begins with a space, tab or newline, or a special token). Each side then adds its own log
  probability of starting a word after the group, so a group's likelihood means "this text, then a word boundary".
- **Loss.** With temperature τ = 100 on the chunk *probability* (a power, not a logit temperature),
  a = p_teacher^(1/τ), b = p_student^(1/τ), the loss is the Bernoulli divergence between a and b, averaged over
  the groups of the batch. tokenkit minimises the binary cross-entropy ``-[a log b + (1-a) log(1-b)]``; this module
  reports the binary KL, which is that cross-entropy minus the teacher's own binary entropy: the same gradient, but
  zero when the student matches the teacher, so a logged value says how far from the teacher the student is.

Two choices differ from tokenkit, both to keep every chunk's likelihood complete: a chunk holding the first token of
either sequence is left out (no position predicts that token, so its likelihood would miss a factor; tokenkit
keeps such a chunk without it), and special tokens (zero bytes of text) belong to no chunk (tokenkit matches chat
markers present on both sides as chunks of their own; LAPT text has none inside a sequence).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from vocadapt.components.tokenizers.canonical import canonical_tokens

TEMPERATURE = 100.0  # tokenkit's binarization_temp
WORD_START_THRESHOLD = 0.1  # tokenkit's tokenizer_pair_bias_threshold in merge_by_space_prob mode
EPSILON = 1e-6  # tokenkit subtracts it from log a and log b so that log(1 - b) stays finite


def token_texts(tokenizer) -> list[bytes]:
    """The bytes each token id stands for in running text, indexed by id: ``b" Caf\\xc3\\xa9"`` for ``ĠCafÃ©`` or
    ``▁Café``, one byte for a ``<0xNN>`` piece; ``b""`` for special tokens and ids that are not tokens."""
    return [form.text_bytes if form is not None and not form.special else b"" for form in canonical_tokens(tokenizer)]


def word_start_mask(tokenizer, size: int | None = None) -> torch.Tensor:
    """[size] bool: the tokens after which ALM's groups may end, i.e. those that start with a space, a tab or a
    newline, and special tokens (an end of sequence ends a word too). ``size`` pads to the embedding rows."""
    forms = canonical_tokens(tokenizer)
    size = size or len(forms)
    mask = torch.zeros(size, dtype=torch.bool)
    for token_id, form in enumerate(forms[:size]):
        if form is not None and (form.special or form.word_start or form.data[:1] in (b"\t", b"\n")):
            mask[token_id] = True
    return mask


@dataclass(frozen=True)
class ChunkAlignment:
    """Which chunk each token of the two tokenizations of one text belongs to (-1: none)."""

    teacher: np.ndarray  # [teacher tokens] int64
    student: np.ndarray  # [student tokens] int64
    chunks: int  # chunk ids are 0 .. chunks - 1; a chunk may be empty on both sides (left out)


def align_chunks(text: str | bytes, teacher_ids: Sequence[int], student_ids: Sequence[int],
                 teacher_texts: Sequence[bytes], student_texts: Sequence[bytes]) -> ChunkAlignment:
    """Chunks of ``text`` that both tokenizations cover exactly.

    A boundary is a byte offset where a token of each side ends. Tokens beyond the last common boundary, or
    beyond the point where a side's tokens stop spelling the text (a normaliser that rewrote it, an unknown
    token), belong to no chunk. Neither does a chunk holding position 0 of either side (see the module docstring).

    Args:
        text: the text both sides tokenized.
        teacher_ids, student_ids: the two tokenizations.
        teacher_texts, student_texts: ``token_texts`` of each tokenizer.
    """
    raw = text.encode("utf-8") if isinstance(text, str) else text
    teacher_ends, teacher_ok = _token_ends(raw, teacher_ids, teacher_texts)
    student_ends, student_ok = _token_ends(raw, student_ids, student_texts)
    boundaries = np.intersect1d(teacher_ends[teacher_ok], student_ends[student_ok])
    if boundaries.size == 0:
        return ChunkAlignment(np.full(len(teacher_ids), -1), np.full(len(student_ids), -1), 0)
    teacher = _chunk_of(teacher_ends, teacher_ok, boundaries)
    student = _chunk_of(student_ends, student_ok, boundaries)
    incomplete = {int(side[0]) for side in (teacher, student) if side.size and side[0] >= 0}
    for chunk in incomplete:
        teacher[teacher == chunk] = -1
        student[student == chunk] = -1
    return ChunkAlignment(teacher, student, int(boundaries.size))


def _token_ends(raw: bytes, ids: Sequence[int], texts: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """(byte offset where each token ends, whether it is a real token within the part that spells ``raw``)."""
    pieces = [texts[i] if 0 <= i < len(texts) else b"" for i in ids]
    lengths = np.array([len(piece) for piece in pieces], dtype=np.int64)
    spelled = b"".join(pieces)
    matched = _common_prefix(spelled, raw)
    if spelled.startswith(b" ") and _common_prefix(spelled[1:], raw) > matched:
        # sentencepiece's dummy prefix (and WordPiece's word start) add a space before the first word that the
        # text does not have (also before text that starts with a space: "▁▁casa" for " casa")
        lengths[int(np.flatnonzero(lengths)[0])] -= 1
        matched = _common_prefix(spelled[1:], raw)
    ends = np.cumsum(lengths)
    return ends, (lengths > 0) & (ends <= matched)


def _common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    left, right = np.frombuffer(a[:n], dtype=np.uint8), np.frombuffer(b[:n], dtype=np.uint8)
    different = np.flatnonzero(left != right)
    return int(different[0]) if different.size else n


def _chunk_of(ends: np.ndarray, ok: np.ndarray, boundaries: np.ndarray) -> np.ndarray:
    chunk = np.searchsorted(boundaries, ends, side="left").astype(np.int64)
    return np.where(ok & (ends <= boundaries[-1]), chunk, -1)


def pad_alignments(alignments: Sequence[np.ndarray], length: int) -> torch.Tensor:
    """[batch, length] chunk ids, -1 where a sequence is shorter."""
    out = torch.full((len(alignments), length), -1, dtype=torch.long)
    for row, chunks in enumerate(alignments):
        out[row, : len(chunks)] = torch.as_tensor(chunks[:length])
    return out


@dataclass
class AlmLoss:
    loss: torch.Tensor  # scalar, mean binary KL over the groups of the batch
    groups: torch.Tensor  # number of groups that counted
    teacher_logp: torch.Tensor  # [groups] debiased group log-likelihoods, for logging and tests
    student_logp: torch.Tensor


@dataclass(frozen=True)
class AlmSide:
    """One side's (teacher's or student's) scores of a batch.

    logp: [batch, length] ``log p(token t | tokens < t)`` at position t (position 0 unused).
    word_start: [batch, length] ``log p(next token starts a word | tokens <= t)``; None without debiasing (then
        the threshold must be None: every chunk is its own group).
    chunks: [batch, length] chunk id per token, -1 for none (``pad_alignments``).
    """

    logp: torch.Tensor
    word_start: torch.Tensor | None
    chunks: torch.Tensor


@dataclass(frozen=True)
class AlmSettings:
    """temperature: τ, applied to the chunk probability as a power 1/τ. threshold: the teacher's word-start
    probability that ends a group; None: no merging, no debiasing."""

    temperature: float = TEMPERATURE
    threshold: float | None = WORD_START_THRESHOLD


def alm_loss(teacher: AlmSide, student: AlmSide, settings: AlmSettings = AlmSettings()) -> AlmLoss:
    """The ALM loss of a batch from each side's next-token log-probabilities."""
    teacher_logp, teacher_word_start, teacher_chunks = teacher.logp, teacher.word_start, teacher.chunks
    student_logp, student_word_start, student_chunks = student.logp, student.word_start, student.chunks
    temperature, threshold = settings.temperature, settings.threshold
    chunks = int(max(int(teacher_chunks.max()), int(student_chunks.max()), -1)) + 1
    if chunks == 0:
        zero = student_logp.sum() * 0.0
        return AlmLoss(zero, torch.tensor(0), zero.new_zeros(0), zero.new_zeros(0))
    t_sum, t_count, t_last = _per_chunk(teacher_logp, teacher_chunks, chunks)
    s_sum, s_count, s_last = _per_chunk(student_logp, student_chunks, chunks)
    valid = (t_count > 0) & (s_count > 0)  # [batch, chunks]
    if threshold is None:
        group_end = valid
        t_append = s_append = torch.zeros_like(t_sum)
    else:
        t_append = teacher_word_start.gather(1, t_last)
        s_append = student_word_start.gather(1, s_last)
        last_valid = valid & (valid.flip(1).cumsum(1).flip(1) == 1)
        group_end = valid & ((t_append > math.log(threshold)) | last_valid)
    ends = group_end.long()
    group = (torch.cumsum(ends, 1) - ends).clamp(max=chunks - 1)  # groups close at their ending chunk
    index = torch.where(valid, group, torch.zeros_like(group))
    weight = valid.to(t_sum.dtype)
    end_weight = (group_end & valid).to(t_sum.dtype)
    t_group = _scatter(t_sum * weight + t_append * end_weight, index, chunks)
    s_group = _scatter(s_sum * weight + s_append * end_weight, index, chunks)
    has = _scatter(end_weight, index, chunks) > 0  # every counted group has exactly one end
    t_group, s_group = t_group[has].clamp(max=0.0), s_group[has].clamp(max=0.0)
    divergence = binary_kl(t_group.detach() / temperature - EPSILON, s_group / temperature - EPSILON)
    loss = divergence.mean() if divergence.numel() else student_logp.sum() * 0.0
    return AlmLoss(loss, has.sum(), t_group.detach(), s_group)


def _per_chunk(logp: torch.Tensor, chunk_ids: torch.Tensor, chunks: int):
    """Per chunk: the sum of its tokens' log-probabilities, their number, and the position of its last token."""
    member = chunk_ids >= 0
    index = torch.where(member, chunk_ids, torch.zeros_like(chunk_ids))
    weight = member.to(logp.dtype)
    sums = _scatter(logp * weight, index, chunks)
    counts = _scatter(weight, index, chunks)
    positions = torch.arange(logp.shape[1], device=logp.device).expand_as(chunk_ids)
    last = torch.zeros(logp.shape[0], chunks, dtype=torch.long, device=logp.device)
    last = last.scatter_reduce(1, index, torch.where(member, positions, torch.zeros_like(positions)), reduce="amax")
    return sums, counts, last


def _scatter(values: torch.Tensor, index: torch.Tensor, size: int) -> torch.Tensor:
    return values.new_zeros(values.shape[0], size).scatter_add(1, index, values)


def binary_kl(log_a: torch.Tensor, log_b: torch.Tensor) -> torch.Tensor:
    """KL(Bernoulli(a) || Bernoulli(b)) from log a and log b (both < 0), elementwise and stable near 0 and 1."""
    a = log_a.exp()
    return a * (log_a - log_b) + (1 - a) * (_log1mexp(log_a) - _log1mexp(log_b))


def _log1mexp(x: torch.Tensor) -> torch.Tensor:
    """log(1 - exp(x)) for x < 0 (Mächler 2012: expm1 near 0, log1p further out)."""
    return torch.where(x > -math.log(2), torch.log(-torch.expm1(x)), torch.log1p(-torch.exp(x)))


def sequence_scores(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                    word_starts: torch.Tensor | None = None, *, slab: int | None = None):
    """What :func:`alm_loss` needs of one side, without the full logits.

    Args:
        model: a causal LM (plain, LoRA-wrapped or compiled) whose last hidden state is the final norm's output.
        input_ids, attention_mask: [batch, length].
        word_starts: [vocabulary] bool (:func:`word_start_mask`), or None.

    Returns:
        ``(token_logp, word_start_logp)``, [batch, length] each: ``log p(token t | tokens < t)`` (0 at position 0)
        and ``log p(the token after t starts a word | tokens <= t)`` (None without ``word_starts``).
    """
    hidden = final_hidden_states(model, input_ids, attention_mask)
    return scores_from_hidden(hidden, _output_head(model), input_ids, word_starts, slab=slab)


def final_hidden_states(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """[batch, length, hidden] after the final norm; the model computes the logits of the last position only."""
    out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True, use_cache=False,
                logits_to_keep=1)
    return out.hidden_states[-1]


def scores_from_hidden(hidden: torch.Tensor, head, input_ids: torch.Tensor, word_starts: torch.Tensor | None = None,
                       *, slab: int | None = None):
    """:func:`sequence_scores` from final hidden states and the head that reads them."""
    from vocadapt.components.training.token_logprobs import DEFAULT_SLAB, next_token_logprobs

    targets = torch.cat([input_ids[:, 1:], input_ids[:, :1]], dim=1)  # the last target is a placeholder
    logp, word_start = next_token_logprobs(hidden, head, targets, word_start_mask=word_starts,
                                           slab=slab or DEFAULT_SLAB)
    token_logp = torch.cat([logp.new_zeros(logp.shape[0], 1), logp[:, :-1]], dim=1)
    return token_logp, word_start


def _output_head(model):
    """The LM head as the model applies it (a LoRA-wrapped head included)."""
    getter = getattr(model, "get_output_embeddings", None)
    head = getter() if getter else None
    if head is None:
        raise ValueError(f"{type(model).__name__} has no output embeddings; ALM needs a causal LM head")
    return head
