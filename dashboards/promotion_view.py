"""The sections that tell an adapt run's story: its figures beside the source model's (several runs on the same
axes), and the promotion view (each gate of a registered version with its interval and verdict, the aliases'
history). Rendering only; what is shown is read and joined by ``promotion.py``."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from vocadapt.dashboards import promotion
from vocadapt.dashboards import runs as data

VERDICT_COLOURS = alt.Scale(domain=["pass", "undecided", "fail"], range=["#2e7d32", "#f9a825", "#c62828"])


def figure(value) -> str:
    """A figure as the page writes it: counts with thousands separators, the rest with four decimals."""
    if value is None or pd.isna(value):
        return "-"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4f}"


def _markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def side_by_side(adapt: pd.DataFrame, methods: pd.DataFrame) -> None:
    """Every figure the chosen adapt runs logged for their methods, beside the source model's."""
    st.header("Side by side with the source model")
    table = promotion.side_by_side_table(adapt, methods)
    if table.empty:
        st.info("No side-by-side figures in the selected adapt runs (evaluation.side_by_side_items: 0, or a run "
                "from before adapt scored them).")
        return
    measures = list(dict.fromkeys(table["measure"]))
    chosen = st.multiselect("Measures on the chart", measures, measures)
    shown = table[table["measure"].isin(chosen)]
    if not shown.empty:
        st.altair_chart(alt.Chart(shown).mark_bar().encode(
            x=alt.X("run:N", title=None, axis=alt.Axis(labelAngle=0, labelLimit=220)), xOffset="model:N",
            y=alt.Y("value:Q", title=None), color=alt.Color("model:N", legend=alt.Legend(orient="top")),
            tooltip=["run", "model", "measure", "value", "source", "difference"],
        ).properties(width=260, height=180).facet(facet=alt.Facet("measure:N", title=None), columns=3)
            .resolve_scale(y="independent"))
    wide = promotion.wide(table)
    rows = [[measure, *(figure(wide.loc[measure, column]) for column in wide.columns)] for measure in wide.index]
    # a markdown table, not a data grid: every figure is in the page as text
    st.markdown(_markdown_table(["measure", *wide.columns], rows))
    st.caption("cloze: acc_bytes on held-out target paragraphs; translation: chrF of one-shot translations; "
               "tokens_per_character, percent_generated_new (%Gen) and same_text_token_saving: of the text each "
               "model generates; bpb_ood_*: bits per byte on out-of-domain text; held-out bpb: after LAPT (step 0 "
               "without LAPT); parameters: before (source model) and after the vocabulary change.")


def promotion_view(client) -> None:
    """A registered version's gates, decided as ``vocadapt promote`` decides them, and the aliases' history."""
    st.title("Promotion: gates and alias history")
    registry = data.registered_models(client)
    if registry.empty:
        st.info("No registered models: `vocadapt adapt` registers its best method as `candidate`.")
        return
    name = st.sidebar.selectbox("Registered model", list(dict.fromkeys(registry["model"])))
    versions = registry[registry["model"] == name]
    labels = [f"{row.version}" + (f" ({row.aliases})" if row.aliases else "") for row in versions.itertuples()]
    label = st.sidebar.selectbox("Version", labels)
    version = int(versions.iloc[labels.index(label)]["version"])
    st.header(f"{name} version {version}: gates against the source model")
    gates, origin = promotion.version_gates(client, name, version)
    verdicts = gates["verdict"].value_counts()
    st.markdown(f"**{verdicts.get('pass', 0)} pass, {verdicts.get('undecided', 0)} undecided, "
                f"{verdicts.get('fail', 0)} fail** of {len(gates)} gates (gates: {origin})")
    _gate_chart(gates)
    rows = [[gate.gate, figure(gate.measured), figure(gate.source), figure(gate.difference),
             f"[{figure(gate.low)}, {figure(gate.high)}]" if pd.notna(gate.low) else "no interval",
             gate.margin or "-", figure(gate.bound), f"**{gate.verdict}**"] for gate in gates.itertuples()]
    st.markdown(_markdown_table(["gate", "measured", "source", "difference", "95% interval", "margin", "bound",
                                 "verdict"], rows))
    st.caption("difference: candidate - source (the measure itself for a floor on one model); its 95% interval "
               "is a paired bootstrap over the items both models were scored on (the runs' gates/items.json). "
               "undecided: the estimate passes, its interval does not.")
    with st.expander("Each gate's rule"):
        st.markdown("\n".join(f"- **{gate.gate}**: {gate.detail}" for gate in gates.itertuples()))
    st.header(f"{name}: alias history")
    history = promotion.alias_history_table(client, name)
    columns = [column for column in promotion.HISTORY_COLUMNS if column != "model"]
    st.markdown(_markdown_table(columns, [["" if pd.isna(row[c]) else str(row[c]) for c in columns]
                                          for _, row in history.iterrows()]))


def _gate_chart(gates: pd.DataFrame) -> None:
    shown = gates.dropna(subset=["difference"])
    if shown.empty:
        return
    base = alt.Chart(shown).encode(y=alt.Y("gate:N", title=None, axis=None))  # the row header names it
    interval = base.mark_rule(strokeWidth=3).encode(x=alt.X("low:Q", title="difference (candidate - source)"),
                                                     x2="high:Q", color=alt.Color("verdict:N", scale=VERDICT_COLOURS))
    estimate = base.mark_point(filled=True, size=80).encode(
        x="difference:Q", color=alt.Color("verdict:N", scale=VERDICT_COLOURS),
        tooltip=["gate", "measured", "source", "difference", "low", "high", "margin", "bound", "verdict"])
    bound = base.mark_tick(thickness=2, color="black").encode(x="bound:Q")
    st.altair_chart(alt.layer(interval, estimate, bound).properties(height=60).facet(
        row=alt.Row("gate:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left", labelLimit=320)))
        .resolve_scale(x="independent", y="independent"))
    st.caption("Point: the estimate; bar: its 95% interval; black tick: the bound the gate's rule compares it with.")
