"""The papers' generation prompts (SAVA Appendix D, Tables 8 and 9), with a configurable number of shots.

Translation (Table 8)::

    Traduci dall'Inglese all'Italiano
    Text: I love you so much.
    Translation: Ti amo così tanto.

    Text: <source sentence>
    Translation:

Question answering (Table 9): ``Contesto: ... / Domanda: ... / Risposta: ...``. The model continues after the last
``Translation:`` / ``Risposta:`` and stops at the end of the line (greedy decoding, SAVA Appendix D).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# SAVA Table 8 gives the headers for English<->Italian; other pairs use the English wording with language names.
TRANSLATION_HEADERS = {
    ("en", "it"): "Traduci dall'Inglese all'Italiano",
    ("it", "en"): "Translate from Italian to English",
}
LANGUAGE_NAMES = {"en": "English", "it": "Italian", "de": "German", "fr": "French", "es": "Spanish", "pt": "Portuguese"}
SHOT_SEPARATOR = "\n\n"
STOP = "\n"


def translation_header(source_language: str, target_language: str) -> str:
    """The instruction line of the translation prompt for one direction."""
    if (source_language, target_language) in TRANSLATION_HEADERS:
        return TRANSLATION_HEADERS[(source_language, target_language)]
    names = [LANGUAGE_NAMES.get(code, code) for code in (source_language, target_language)]
    return f"Translate from {names[0]} to {names[1]}"


def translation_query(text: str) -> str:
    """One example without its answer: ``Text: <text>\\nTranslation:`` (the answer follows after a space)."""
    return f"Text: {_one_line(text)}\nTranslation:"


def translation_prompt(
    text: str, source_language: str, target_language: str, shots: Sequence[Mapping[str, str]] = ()
) -> str:
    """The full prompt: header, ``len(shots)`` solved examples (dicts with both language codes), the query."""
    solved = [f"{translation_query(shot[source_language])} {_one_line(shot[target_language])}" for shot in shots]
    body = SHOT_SEPARATOR.join([*solved, translation_query(text)])
    return f"{translation_header(source_language, target_language)}\n{body}"


def question_answering_query(context: str, question: str) -> str:
    """SAVA Table 9 without the answer."""
    return f"Contesto: {_one_line(context)}\nDomanda: {_one_line(question)}\nRisposta:"


def question_answering_prompt(context: str, question: str, shots: Sequence[Mapping[str, str]] = ()) -> str:
    """Shots are dicts with ``context``, ``question`` and ``answer``."""
    solved = [f"{question_answering_query(s['context'], s['question'])} {_one_line(s['answer'])}" for s in shots]
    return SHOT_SEPARATOR.join([*solved, question_answering_query(context, question)])


def first_line(generated: str) -> str:
    """The answer part of a generation: up to the first newline, stripped."""
    return generated.split(STOP, 1)[0].strip()


def _one_line(text: str) -> str:
    # A newline inside an example would end the answer early: prompts keep each field on one line.
    return " ".join(text.split())
