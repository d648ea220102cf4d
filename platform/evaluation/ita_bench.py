"""ITA-Bench's translated PIQA, SciQ and BoolQ for lm-eval task YAMLs (``configs/evaluation/tasks/vocadapt_*_it``).

SAVA Table 3 scores the translated section of ITA-Bench (Moroni et al., 2024; the Sapienza NLP datasets
``sapienzanlp/{piqa,sciq,boolq}_italian`` on the Hugging Face hub), 0-shot multiple choice by log-likelihood.
Every record keeps the English original next to its translation: ``input`` / ``input_translation``, ``choices``
/ ``choices_translation``, ``label`` and ``metadata`` (``category``; ``passage`` / ``passage_translation`` for
SciQ and BoolQ). The prompts are ITA-Bench's own Italian-to-Italian ones (its lm-eval tasks
``itabench_{piqa,sciq_with_passages,boolq_with_passages}_it-it``); SciQ and BoolQ keep the support passage, as
lm-eval's English ``sciq`` and ``boolq`` do, so each Italian score has a comparable English original. Prompts end
where the answer starts (a space or a newline): lm-eval moves that whitespace onto the continuation, and the
YAMLs set ``target_delimiter: ""``. lm-eval imports these functions by dotted name (``!function
vocadapt.platform.evaluation.ita_bench.piqa_doc_to_text``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# PIQA's records come in four shapes (metadata.category); each reads differently before its answer.
_PIQA_PROMPTS = {
    "question": "Domanda: {input}\nRisposta: ",
    "text_completion": "{input} ",
    "topic": "{input}\n",
    "property": "{input}: ",
}
BOOLQ_CHOICES = ["sì", "no"]


def _category(doc: Mapping[str, Any]) -> str:
    return (doc.get("metadata") or {}).get("category", "question")


def _passage(doc: Mapping[str, Any]) -> str:
    return ((doc.get("metadata") or {}).get("passage_translation") or "").strip()


def choices(doc: Mapping[str, Any]) -> list[str]:
    """The Italian answer choices (PIQA, SciQ)."""
    return list(doc["choices_translation"])


def label(doc: Mapping[str, Any]) -> int:
    """Index of the right choice (PIQA, SciQ)."""
    return int(doc["label"])


def piqa_doc_to_text(doc: Mapping[str, Any]) -> str:
    category = _category(doc)
    if category not in _PIQA_PROMPTS:
        raise ValueError(f"PIQA record {doc.get('id', '?')!r}: unknown category {category!r}")
    return _PIQA_PROMPTS[category].format(input=doc["input_translation"])


def sciq_doc_to_text(doc: Mapping[str, Any]) -> str:
    passage = _passage(doc)
    prefix = f"Testo: {passage}\n" if passage else ""
    return f"{prefix}Domanda: {doc['input_translation']}\nRisposta: "


def boolq_doc_to_text(doc: Mapping[str, Any]) -> str:
    passage = _passage(doc)
    prefix = f"{passage}\n" if passage else ""
    return f"{prefix}Domanda: {doc['input_translation']}\nRisposta (sì o no): "


def boolq_doc_to_choice(doc: Mapping[str, Any]) -> list[str]:
    return list(BOOLQ_CHOICES)


def boolq_doc_to_target(doc: Mapping[str, Any]) -> int:
    """0 ("sì") for a true statement, 1 ("no") otherwise; the label is a boolean or the string "True"/"False"."""
    value = doc["label"]
    if isinstance(value, str):
        if value.strip() not in {"True", "False"}:
            raise ValueError(f"BoolQ record {doc.get('id', '?')!r}: label {value!r} is neither True nor False")
        value = value.strip() == "True"
    return 0 if bool(value) else 1
