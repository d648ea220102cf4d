"""The dashboard's family-fertility view: tokens per word of every model family on every language, before and after
adaptation to Italian, beside the published figures (the JSON ``benchmarks/family_fertility.py`` writes).

The matrix is read from ``$VOCADAPT_HOME/benchmarks/family-fertility/matrix.json`` when a run wrote one there (run
the script with ``--out $VOCADAPT_HOME/benchmarks/family-fertility``), else from the one committed in
``benchmarks/results/family-fertility/``; the sidebar can point at any other file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from vocadapt.platform.assets.embedded import vocadapt_home

COMMITTED = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "family-fertility" / "matrix.json"
MEASURES = {"tokens_per_word": "tokens per word", "tokens_per_paragraph": "tokens per paragraph",
            "tokens_per_byte": "tokens per byte", "reduction": "token reduction against the source"}


def matrix_path(home: Path | None = None) -> Path | None:
    """The matrix to show: the one under the vocadapt home, else the committed one, else None."""
    for path in ((home or vocadapt_home()) / "benchmarks" / "family-fertility" / "matrix.json", COMMITTED):
        if path.is_file():
            return path
    return None


def load_matrix(path: Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def matrix_frame(matrix: dict[str, Any]) -> pd.DataFrame:
    """One row per family, variant, language and text (the JSON's ``rows``), variants in the order measured."""
    frame = pd.DataFrame(matrix.get("rows", []))
    if frame.empty:
        return frame
    frame["column"] = frame["language"] + " " + frame["text"]
    return frame


def matrix_table(frame: pd.DataFrame, measure: str) -> pd.DataFrame:
    """Rows: family and variant (in the order measured); columns: language and text; values: ``measure``."""
    rows = list(dict.fromkeys(zip(frame["display"], frame["variant"])))
    columns = list(dict.fromkeys(frame["column"]))
    table = frame.pivot_table(index=["display", "variant"], columns="column", values=measure, aggfunc="first")
    table = table.reindex(index=pd.MultiIndex.from_tuples(rows, names=["family", "variant"]), columns=columns)
    table.columns.name = None
    return table


def identical_sources(frame: pd.DataFrame) -> list[tuple[str, str]]:
    """Pairs of families whose released tokenizers give the same token counts on every text: most likely one
    tokenizer fetched under two names, which the reader should know before comparing the rows."""
    source = frame[frame["variant"] == "source"].pivot_table(index="display", columns="column", values="tokens_per_word")
    names = list(source.index)
    return [(a, b) for i, a in enumerate(names) for b in names[i + 1:] if source.loc[a].equals(source.loc[b])]


def published_table(matrix: dict[str, Any], frame: pd.DataFrame) -> pd.DataFrame:
    """The published figures, each beside what this matrix measured for the same family and measure on the same
    language (held-out and out-of-domain text); a figure on languages not measured here (Design choices' Hindi,
    Arabic, Turkish and Tamil) is set beside Italian, the language the matrix adapts to, and says so."""
    published = pd.DataFrame(matrix.get("published", []))
    if published.empty:
        return published
    measured = []
    for _, figure in published.iterrows():
        language = figure["language"] if figure["language"] in set(frame["language"]) else "it"
        rows = frame[(frame["family"] == figure["family"]) & (frame["language"] == language)]
        if figure["measure"] == "tokens_per_word":
            rows = rows[rows["variant"] == "source"]
            value = rows.set_index("text")["tokens_per_word"]
        elif figure["measure"] == "reduction_after_replace":
            value = rows[rows["variant"] == "replace"].set_index("text")["reduction"]
        else:  # an expansion by about 1K tokens
            value = rows[rows["variant"].isin(["expand+1000"])].set_index("text")["reduction"]
        prefix = "" if language == figure["language"] else f"{language}: "
        missing = ("not measured" if figure["family"] in set(frame["family"])
                   else "not a tokenizer of this matrix: compare the replace rows")
        measured.append(prefix + ", ".join(f"{text} {number:.3f}" for text, number in value.items()) or missing)
    return published.assign(measured_here=measured)


def render(default_path: Path | None = None) -> None:
    """The view: pick a measure, see the matrix, the published figures, and how the matrix was made."""
    st.title("Fertility of the model families, before and after adaptation")
    found = default_path or matrix_path()
    chosen = st.sidebar.text_input("Family fertility JSON", str(found) if found else "")
    if not chosen or not Path(chosen).is_file():
        st.warning("No family fertility matrix found: run `python benchmarks/family_fertility.py` (it writes "
                   f"{COMMITTED}).")
        return
    matrix = load_matrix(Path(chosen))
    frame = matrix_frame(matrix)
    if frame.empty:
        st.info(f"{chosen} holds no measured rows yet.")
        return
    st.markdown(f"**Source:** `{chosen}`  \n**Command:** `{matrix.get('command', '?')}`  \n"
                f"**Definition:** {matrix.get('definition', '?')}")
    st.header("Fertility matrix")
    for first, second in identical_sources(frame):
        st.warning(f"{first} and {second} give the same tokens on every text: one vocabulary under two names?")
    labels = list(MEASURES.values())
    label = st.selectbox("Measure", labels, index=0)
    measure = next(key for key, name in MEASURES.items() if name == label)
    shown = frame.assign(row=frame["display"] + " / " + frame["variant"]).dropna(subset=[measure])
    rows = list(dict.fromkeys(shown["row"]))
    base = alt.Chart(shown).encode(x=alt.X("column:N", title=None, sort=list(dict.fromkeys(frame["column"])),
                                           axis=alt.Axis(labelAngle=-30)),
                                   y=alt.Y("row:N", title=None, sort=rows, axis=alt.Axis(labelLimit=300)))
    st.altair_chart((base.mark_rect().encode(color=alt.Color(f"{measure}:Q", title=label,
                                                             scale=alt.Scale(scheme="viridis")),
                                             tooltip=["display", "variant", "column", measure])
                     + base.mark_text(fontSize=10).encode(text=alt.Text(f"{measure}:Q", format=".2f"),
                                                          color=alt.value("white")))
                    .properties(height=alt.Step(22), width=alt.Step(80)), width="content")
    st.dataframe(matrix_table(frame, measure).style.format("{:.3f}", na_rep=""))
    st.header("Published figures beside the measured ones")
    st.dataframe(published_table(matrix, frame), hide_index=True)
    st.header("How the adapted tokenizers were made")
    settings = matrix.get("settings", {})
    st.markdown("\n".join(f"- **{key}**: {value}" for key, value in settings.items()))
    built = [{"family": entry["display"], "variant": variant, "vocab_size": figures["vocab_size"],
              "seconds": figures.get("seconds"), "new_tokens": figures.get("new_tokens")}
             for entry in matrix.get("families", {}).values() for variant, figures in entry["variants"].items()]
    st.dataframe(pd.DataFrame(built), hide_index=True)
    for line in matrix.get("skipped", []):
        st.caption(f"skipped: {line}")
