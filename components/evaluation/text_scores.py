"""Text-generation scores as the papers report them: chrF for translation ("0.01GB" §6.5, sacrebleu), ROUGE-L for
question answering and summarisation (SAVA Tables 5-6, rouge-score), both on a 0-100 scale."""

from __future__ import annotations

from collections.abc import Sequence


def _check_pairs(hypotheses: Sequence[str], references: Sequence[str]) -> None:
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references: pass one per example")
    if not hypotheses:
        raise ValueError("no examples to score: pass at least one hypothesis and its reference")


def chrf(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Corpus-level chrF (character 6-grams, beta 2; sacrebleu's defaults), 0-100."""
    import sacrebleu

    _check_pairs(hypotheses, references)
    return float(sacrebleu.corpus_chrf(list(hypotheses), [list(references)]).score)


def chrf_statistics(hypotheses: Sequence[str], references: Sequence[str]) -> list[list[int]]:
    """sacrebleu's chrF sufficient statistics, one row per example: their sum gives :func:`chrf` (the paired
    bootstrap of ``components/evaluation/bootstrap.py`` resamples these rows)."""
    from sacrebleu.metrics import CHRF

    _check_pairs(hypotheses, references)
    return [list(map(int, row)) for row in CHRF()._extract_corpus_statistics(list(hypotheses), [list(references)])]


def rouge_l(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Mean ROUGE-L F-measure over examples, 0-100. No stemming: the Porter stemmer is English-only."""
    from rouge_score import rouge_scorer

    _check_pairs(hypotheses, references)
    # rouge-score's default tokenizer drops every non [a-z0-9] character, which deletes accented Italian letters;
    # split on whitespace instead so "città" and "citta" stay different words.
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False, tokenizer=_WhitespaceTokenizer())
    scores = [scorer.score(ref, hyp)["rougeL"].fmeasure for hyp, ref in zip(hypotheses, references)]
    return 100.0 * sum(scores) / len(scores)


class _WhitespaceTokenizer:
    """rouge-score's tokenizer interface: lower-cased whitespace words with surrounding punctuation stripped."""

    _PUNCTUATION = ".,;:!?\"'«»“”‘’()[]{}"

    def tokenize(self, text: str) -> list[str]:
        words = (word.strip(self._PUNCTUATION) for word in text.lower().split())
        return [word for word in words if word]
