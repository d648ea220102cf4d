"""Out-of-domain text must be text no training saw: exact and near-duplicate paragraphs are found
(components/corpora/overlap.py) and refuse the run before any work (pipelines/preflight.py), per-language
declarations resolve (platform/assets/out_of_domain.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from vocadapt.components.corpora.overlap import find_overlaps, normalise
from vocadapt.components.errors import UserError
from vocadapt.pipelines.preflight import check_out_of_domain_unseen
from vocadapt.platform.config import load_config
from vocadapt.platform.assets.out_of_domain import declared_source, out_of_domain_for_config
from vocadapt.platform.assets.sources import ResolvedInputs

TRAINING = [
    "Il gatto dorme sul divano tutto il pomeriggio, mentre fuori piove.",
    "La documentazione spiega come inserire una tabella nel documento di testo.",
    "In principio Dio creò il cielo e la terra, e la terra era informe e deserta.",
    "Per salvare il file, scegliete File - Salva con nome e digitate un nome.",
]
UNSEEN = [
    "Chi dorme non piglia pesci, ma almeno non si stanca a cercarli nel mare.",
    "Un computer è un idiota velocissimo: fa esattamente quello che gli dici.",
    "La legge di Murphy dice che se qualcosa può andare male, andrà male.",
]


def test_normalise_ignores_case_whitespace_and_punctuation():
    assert normalise("  Chi va PIANO,\tva sano... e va lontano!  ") == "chi va piano va sano e va lontano"
    assert normalise("l’uomo") == normalise("l'uomo") == "l uomo"


def test_disjoint_text_has_no_overlap():
    assert find_overlaps(UNSEEN, [("train.txt", TRAINING)]) == []


def test_an_exact_paragraph_is_found_after_normalising():
    copied = "il gatto dorme sul divano  tutto il pomeriggio mentre fuori PIOVE"
    matches = find_overlaps([UNSEEN[0], copied], [("a.txt", TRAINING[:2]), ("b.txt", TRAINING[2:])])
    assert [(m.evaluation_index, m.exact, m.jaccard, m.training_source, m.training_line) for m in matches] == [
        (1, True, 1.0, "a.txt", 1)]


def test_a_near_duplicate_is_found_and_the_threshold_decides():
    edited = "In principio Dio creò i cieli e la terra; la terra era informe e vuota."  # a few words changed
    matches = find_overlaps([edited, *UNSEEN], [("bible.txt", TRAINING)])
    assert len(matches) == 1 and not matches[0].exact
    assert matches[0].training_line == 3 and 0.5 <= matches[0].jaccard < 1.0
    assert find_overlaps([edited], [("bible.txt", TRAINING)], threshold=0.95) == []


def test_training_text_is_compared_in_blocks(monkeypatch):
    """A match in a later block of lines keeps its true line number."""
    import vocadapt.components.corpora.overlap as overlap

    monkeypatch.setattr(overlap, "_BLOCK_LINES", 3)
    lines = [f"riga di riempimento numero {index} del corpus" for index in range(10)] + [TRAINING[1]]
    matches = find_overlaps([TRAINING[1].upper(), *UNSEEN], [("big.txt", iter(lines))])
    assert [(m.evaluation_index, m.training_line, m.exact) for m in matches] == [(0, 11, True)]


def _world(tmp_path: Path, out_of_domain: list[str], lapt_text: list[str] | None = None):
    train, source, held_out = tmp_path / "it.txt", tmp_path / "en.txt", tmp_path / "ood-it.txt"
    train.write_text("\n".join(TRAINING) + "\n", encoding="utf-8")
    source.write_text("The cat sleeps on the sofa all afternoon.\n", encoding="utf-8")
    held_out.write_text("\n".join(out_of_domain) + "\n", encoding="utf-8")
    english = tmp_path / "ood-en.txt"
    english.write_text("A fool and his money are soon parted, said nobody rich.\n", encoding="utf-8")
    overrides = [f"corpus.train=[{train}]", f"corpus.validation=[{train}]",
                 f"evaluation.out_of_domain_text={{it: [{held_out}], en: [{english}]}}"]
    if lapt_text is not None:
        extra = tmp_path / "lapt.txt"
        extra.write_text("\n".join(lapt_text) + "\n", encoding="utf-8")
        overrides.append(f"lapt.train_files={{target: [{extra}]}}")
    config = load_config(None, ["target.language=it", *overrides])
    inputs = ResolvedInputs("model", (train,), (train,), (source,), (source,), embedded=False)
    return config, inputs


def test_preflight_refuses_exact_and_near_duplicates_and_accepts_disjoint_text(tmp_path):
    console = Console(record=True, width=200)
    config, inputs = _world(tmp_path, UNSEEN)
    check_out_of_domain_unseen(config, inputs, console)  # disjoint: accepted
    assert "4 paragraphs against 2 training files, 0 overlapping" in console.export_text()  # 3 it + 1 en
    config, inputs = _world(tmp_path, [*UNSEEN, TRAINING[0].lower()])
    with pytest.raises(UserError, match=r"(?s)overlaps the training text in 1 paragraph.*equals .*it\.txt line 1"):
        check_out_of_domain_unseen(config, inputs, console)
    near = "Per salvare il file scegliete File Salva con nome, poi digitate il nome."
    config, inputs = _world(tmp_path, [near, *UNSEEN])
    with pytest.raises(UserError, match=r"(?s)nearly duplicates \(Jaccard 0\.\d\d\) .*it\.txt line 4"):
        check_out_of_domain_unseen(config, inputs, console)


def test_lapt_training_files_count_as_training_text(tmp_path):
    config, inputs = _world(tmp_path, UNSEEN, lapt_text=["nuovo testo di addestramento", UNSEEN[2]])
    with pytest.raises(UserError, match="lapt.txt line 2"):
        check_out_of_domain_unseen(config, inputs, Console(quiet=True))
    config.lapt.enabled = False  # LAPT does not run: its files train nothing
    check_out_of_domain_unseen(config, inputs, Console(quiet=True))


def test_declarations_per_language(tmp_path):
    config = load_config(None, ["target.language=hi", "corpus.train=[a]", "corpus.validation=[b]"])
    assert declared_source(config.evaluation, "it") == "fortunes"  # Debian has Italian fortunes
    assert declared_source(config.evaluation, "hi") is None  # none, and nothing declared
    config = load_config(None, ["target.language=hi", "corpus.train=[a]", "corpus.validation=[b]",
                                "evaluation.out_of_domain_text={hi: fortunes}"])
    with pytest.raises(UserError, match="out_of_domain_text.hi: Debian has no fortunes"):
        out_of_domain_for_config(config)
    config = load_config(None, ["target.language=hi", "corpus.train=[a]", "corpus.validation=[b]",
                                f"evaluation.out_of_domain_text={{hi: [{tmp_path}/none.txt], en: [{tmp_path}/x]}}"])
    with pytest.raises(UserError, match="do not exist"):
        out_of_domain_for_config(config)
    (tmp_path / "hi.txt").write_text("पहला अनुच्छेद\n\nदूसरा अनुच्छेद\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("one\ntwo\nthree\n", encoding="utf-8")
    config = load_config(None, ["target.language=hi", "corpus.train=[a]", "corpus.validation=[b]",
                                "evaluation.out_of_domain_documents=2", f"evaluation.out_of_domain_text="
                                f"{{hi: [{tmp_path}/hi.txt], en: [{tmp_path}/en.txt]}}"])
    documents = out_of_domain_for_config(config)
    assert sorted(documents["target"]) == ["दूसरा अनुच्छेद", "पहला अनुच्छेद"] and len(documents["source"]) == 2
