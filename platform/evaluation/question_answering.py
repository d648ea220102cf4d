"""SQuAD-style question answering for lm-eval task YAMLs (``configs/evaluation/tasks/vocadapt_squad_it.yaml``).

The prompt is SAVA Table 9's (``Contesto: ... / Domanda: ... / Risposta:``, from
``components/evaluation/prompts.py``, the same one the offline code uses); the score is ROUGE-L (SAVA Tables 5-6,
0-100, rouge-score with a whitespace tokenizer that keeps accented letters) of the first generated line against
the closest of the example's reference answers, as SQuAD takes the best over its answers. lm-eval imports these
functions by their dotted name (``!function vocadapt.platform.evaluation.question_answering.process_results``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vocadapt.components.evaluation.prompts import first_line, question_answering_query
from vocadapt.components.evaluation.text_scores import rouge_l


def reference_answers(doc: Mapping[str, Any]) -> list[str]:
    """The non-empty answer texts of a SQuAD record (``answers`` as ``{"text": [...]}`` or a list of dicts)."""
    answers = doc["answers"]
    texts = answers["text"] if isinstance(answers, Mapping) else [answer["text"] for answer in answers]
    found = [" ".join(text.split()) for text in texts if text and text.strip()]
    if not found:
        raise ValueError(f"question {doc.get('id', '?')!r} has no reference answer")
    return found


def doc_to_text(doc: Mapping[str, Any]) -> str:
    return question_answering_query(doc["context"], doc["question"])


def doc_to_target(doc: Mapping[str, Any]) -> str:
    """The first reference answer: what a few-shot example shows after ``Risposta:``."""
    return reference_answers(doc)[0]


def process_results(doc: Mapping[str, Any], results: Sequence[str]) -> dict[str, float]:
    """``{"rougeL": best ROUGE-L over the references}`` for one generated answer (lm-eval averages them)."""
    answer = first_line(results[0])
    return {"rougeL": max(rouge_l([answer], [reference]) for reference in reference_answers(doc))}
