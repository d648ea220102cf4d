"""The vocadapt dashboard: compare adaptation and evaluation runs recorded in MLflow.

Run with ``vocadapt dashboard`` (or ``streamlit run dashboards/app.py``). The tracking store comes from
``MLFLOW_TRACKING_URI`` (the command sets it), else ``sqlite:///mlflow.db`` in the working folder, and can be
changed in the sidebar. Nothing here knows the demo's run names: runs are found by what they logged. The sidebar's
"View" switches to the model families' fertility matrix (``family_fertility.py``), which reads a JSON, not MLflow.
"""

from __future__ import annotations

import os

import altair as alt
import pandas as pd
import streamlit as st

from vocadapt.dashboards import family_fertility, promotion_view
from vocadapt.dashboards import runs as data
from vocadapt.platform.tracking import resolve_tracking_uri

FAMILY_FERTILITY = "Family fertility"
PROMOTION = "Promotion"
VIEWS = ("MLflow runs", PROMOTION, FAMILY_FERTILITY)  # the last reads benchmarks/family_fertility.py's JSON


def main() -> None:
    st.set_page_config(page_title="vocadapt", layout="wide")
    view = st.sidebar.radio("View", VIEWS)
    if view == FAMILY_FERTILITY:
        family_fertility.render()
        return
    uri = st.sidebar.text_input("MLflow tracking URI", os.environ.get("MLFLOW_TRACKING_URI") or resolve_tracking_uri())
    client = data.client_for(uri)
    if view == PROMOTION:
        promotion_view.promotion_view(client)
        return
    st.title("vocadapt: vocabulary adaptation runs")
    names = data.experiment_names(client)
    if not names:
        st.warning(f"No experiments in {uri}: run `vocadapt adapt` first.")
        return
    preferred = os.environ.get("VOCADAPT_DASHBOARD_EXPERIMENT")
    experiment = st.sidebar.selectbox("Experiment", names, index=names.index(preferred) if preferred in names else
                                      _busiest(client, names))
    everything = data.load_runs(client, experiment)
    adapt = everything.of_kind("adapt").iloc[:0]
    if everything.of_kind("adapt").empty and everything.of_kind("evaluation").empty:
        st.info(f"Experiment `{experiment}` has no adaptation or evaluation runs to compare.")
    else:
        adapt = _comparison(client, everything)
    _corpus_expectations(client, data.expectation_runs(everything, adapt))
    _leaderboard(everything)
    _language_matrix(client, everything)
    _registry(client)


def _comparison(client, everything: data.ExperimentRuns) -> pd.DataFrame:
    """The comparison sections; returns the adapt runs chosen in the sidebar."""
    adapt, evaluations = _pick_runs(everything)
    methods = everything.frame[everything.frame["parent_run_id"].isin(adapt["run_id"])]
    methods = methods[methods["kind"] == "method"]
    st.markdown("**Comparing:** " + ", ".join(f"`{label}`" for label in [*adapt["label"], *methods["label"],
                                                                          *evaluations["label"]]) or "nothing")
    promotion_view.side_by_side(adapt, methods)
    _per_language(methods, adapt)
    _fertility(adapt)
    _bits_per_byte(methods, adapt)
    _curves(client, methods)
    if evaluations.empty:  # an adapt run's own scores are in the side-by-side section
        st.caption("Scores of `vocadapt evaluate` runs (lm-eval benchmarks, generation throughput, parameter "
                   "counts, embedding similarity) appear here when an evaluation run is selected.")
    else:
        _benchmarks(evaluations)
        _throughput(evaluations)
        _parameters(evaluations)
        _similarity(client, evaluations)
    _energy(pd.concat([adapt, methods, evaluations]))
    return adapt


def _busiest(client, names: list[str]) -> int:
    """The experiment with the most runs to compare; a language matrix's runs do not count (its own view)."""
    counts = []
    for name in names:
        runs = client.search_runs([client.get_experiment_by_name(name).experiment_id], max_results=200)
        matrices = {run.info.run_id for run in runs if "vocadapt.matrix" in run.data.tags}
        counts.append(sum(run.info.run_id not in matrices and run.data.tags.get("mlflow.parentRunId") not in matrices
                          for run in runs))
    return max(range(len(names)), key=lambda i: counts[i])


def _pick_runs(everything: data.ExperimentRuns) -> tuple[pd.DataFrame, pd.DataFrame]:
    adapt_all, eval_all = everything.of_kind("adapt"), everything.of_kind("evaluation")
    chosen_adapt = st.sidebar.multiselect("Adaptation runs", list(adapt_all["label"]), _finished(adapt_all))
    chosen_eval = st.sidebar.multiselect("Evaluation runs", list(eval_all["label"]), _finished(eval_all))
    return adapt_all[adapt_all["label"].isin(chosen_adapt)], eval_all[eval_all["label"].isin(chosen_eval)]


def _finished(runs: pd.DataFrame) -> list[str]:
    """Selected at start: the finished runs (a crashed or still running one can be added by hand), else all."""
    finished = runs[runs["status"] == "FINISHED"]
    return list((finished if not finished.empty else runs)["label"])


def _series(table: pd.DataFrame, column: str) -> pd.Series:
    """What to colour by: ``column`` alone for one run, else run and ``column`` together."""
    if table["run"].nunique() <= 1:
        return table[column]
    return table["run"] + ": " + table[column]


def _section(title: str, table: pd.DataFrame, when_empty: str) -> bool:
    """A section's header, and whether its ``table`` has rows to show; an empty one says ``when_empty`` instead."""
    st.header(title)
    if table.empty:
        st.info(when_empty)
        return False
    return True


def _fertility(adapt: pd.DataFrame) -> None:
    table = data.fertility_table(adapt)
    if not _section("Fertility per tokenizer and language", table, "No fertility metrics in the selected runs."):
        return
    measures = sorted(table["measure"].unique())
    measure = st.selectbox("Measure", measures,
                           index=measures.index("tokens_per_word") if "tokens_per_word" in measures else 0)
    shown = table[table["measure"] == measure].assign(series=lambda t: _series(t, "tokenizer"))
    chart = alt.Chart(shown).mark_bar().encode(
        x=alt.X("language:N", title="held-out text", axis=alt.Axis(labelAngle=0)), xOffset="series:N", y=alt.Y("value:Q", title=measure),
        color=alt.Color("series:N", title="tokenizer", legend=alt.Legend(orient="bottom", labelLimit=400)),
        tooltip=["run", "tokenizer", "language", "value"],
    ).properties(height=320)
    st.altair_chart(chart, width="stretch")
    st.dataframe(shown.pivot_table(index=["run", "tokenizer"], columns="language", values="value"))


def _bits_per_byte(methods: pd.DataFrame, adapt: pd.DataFrame) -> None:
    table = data.bits_per_byte_table(methods, adapt)
    if not _section("Bits per byte: step 0 and after LAPT (lower is better)", table,
                    "No bits-per-byte metrics in the selected runs."):
        return
    stages = list(data.BPB_STAGES.values())
    models = list(dict.fromkeys(table.sort_values("stage", key=lambda s: s.map(stages.index))["model"]))
    chart = alt.Chart(table).mark_bar().encode(
        y=alt.Y("model:N", title=None, sort=models, axis=alt.Axis(labelLimit=320)),
        x=alt.X("bpb:Q", title="bits per byte"), yOffset=alt.YOffset("stage:N", sort=stages),
        color=alt.Color("stage:N", sort=stages, legend=alt.Legend(orient="top")),
        column=alt.Column("stream:N", title="held-out text"), tooltip=["model", "stream", "stage", "bpb"],
    ).properties(width=380, height=26 * len(models) * len(set(table["stage"])))
    st.altair_chart(chart)
    pivot = table.pivot_table(index="model", columns=["stream", "stage"], values="bpb").reindex(models)
    st.dataframe(pivot.reindex(columns=sorted(pivot.columns, key=lambda c: (c[0], stages.index(c[1])))))


def _per_language(methods: pd.DataFrame, adapt: pd.DataFrame) -> None:
    """Each target language's out-of-domain bits per byte, generation and side-by-side scores (several target
    languages: one row per model and language)."""
    table = data.language_scores_table(methods, adapt)
    if table["language"].nunique() < 2:  # one target language: the side-by-side section shows it all
        return
    st.header("Per target language: out-of-domain bits per byte, generation, side-by-side benchmark")
    st.caption("ood_bpb: bits per byte on out-of-domain text (lower is better); tokens_per_character and "
               "same_text_token_saving: of the text each model generates on that language's prompts; cloze and "
               "chrF: that language's side-by-side benchmark")
    shown = table.dropna(axis="columns", how="all")
    if "ood_bpb" in shown:
        st.altair_chart(alt.Chart(shown.dropna(subset=["ood_bpb"])).mark_bar().encode(
            y=alt.Y("model:N", title=None, axis=alt.Axis(labelLimit=320)), x=alt.X("ood_bpb:Q", title="bits per byte"),
            color=alt.Color("model:N", legend=None), column=alt.Column("language:N", title="out-of-domain text"),
            tooltip=list(shown.columns)).properties(width=260))
    st.dataframe(shown, hide_index=True)


def _curves(client, methods: pd.DataFrame) -> None:
    curves = data.loss_curves(client, methods)
    if not _section("Training curves", curves, "No training curves (LAPT did not run, or logged no steps)."):
        return
    options = sorted(curves["metric"].unique())
    losses = [option for option in options if option.endswith("loss")]
    metric = st.selectbox("Curve", options, index=options.index(losses[0]) if losses else 0)
    shown = curves[curves["metric"] == metric]
    st.altair_chart(alt.Chart(shown).mark_line(point=True).encode(
        x=alt.X("step:Q", axis=alt.Axis(format="d", tickMinStep=1)),
        y=alt.Y("value:Q", title=metric, scale=alt.Scale(zero=False)), color="run:N",
        tooltip=["run", "step", "value"],
    ).interactive(), width="stretch")


def _benchmarks(evaluations: pd.DataFrame) -> None:
    table = data.benchmark_table(evaluations)
    if not _section("Benchmark scores", table, "No evaluation runs selected: run `vocadapt evaluate --model ...`."):
        return
    best = data.best_per_column(table)
    st.dataframe(table.style.highlight_max(axis=0, color="#a5d6a7").format("{:.4f}"))
    wins = pd.Series(list(best.values())).value_counts()
    st.markdown(f"**Best per column** (marked green, higher is better; {len(best)} columns): "
                + "; ".join(f"`{row}` in {count}" for row, count in wins.items()))


def _throughput(evaluations: pd.DataFrame) -> None:
    table = data.throughput_table(evaluations)
    if not _section("Generation throughput and speed-up", table,
                    "No generation measurements in the selected evaluation runs."):
        return
    st.dataframe(table)
    shown = table.assign(series=lambda t: _series(t, "model"))
    st.altair_chart(alt.Chart(shown).mark_bar().encode(
        x=alt.X("task:N", title=None, axis=alt.Axis(labelAngle=0, labelLimit=300)), xOffset="series:N",
        y=alt.Y("characters_per_second:Q", title="characters / s"),
        color=alt.Color("series:N", title="model", legend=alt.Legend(orient="bottom", labelLimit=400)),
        tooltip=list(table.columns),
    ).properties(height=300), width="stretch")
    speeds = [f"`{row.run}` {row.task}: {row.speed_up_chars:.2f}x" for row in table.itertuples()
              if row.model == "adapted" and pd.notna(row.speed_up_chars)]
    if speeds:
        st.markdown("**Speed-up (characters/s vs the source model, same prompts):** " + "; ".join(speeds))


def _parameters(evaluations: pd.DataFrame) -> None:
    table = data.parameter_table(evaluations)
    if not _section("Parameter counts", table, "No parameter counts in the selected evaluation runs."):
        return
    st.dataframe(table)


def _similarity(client, evaluations: pd.DataFrame) -> None:
    st.header("Embedding similarity (relative representations)")
    tables = data.similarity_tables(client, evaluations)
    if not tables:
        st.info("No similarity measured: pass --helper or --similar-to to `vocadapt evaluate`.")
        return
    for label, table in tables.items():
        st.subheader(f"{label} ({table['anchors']} anchors, {table['tokens_compared']} tokens)")
        long = data.similarity_long(table)
        base = alt.Chart(long).encode(x=alt.X("a:N", title=None, axis=alt.Axis(labelAngle=-30, labelLimit=300)),
                                      y=alt.Y("b:N", title=None, axis=alt.Axis(labelLimit=300)))
        heat = base.mark_rect().encode(color=alt.Color("similarity:Q",
                                                       scale=alt.Scale(scheme="viridis", domain=[0, 100])))
        text = base.mark_text().encode(text=alt.Text("similarity:Q", format=".1f"),
                                       color=alt.condition("datum.similarity > 80", alt.value("black"),
                                                           alt.value("white")))
        # a step per cell, padded around the labels (Streamlit's default "fit" squeezes the cells to nothing)
        st.altair_chart((heat + text).properties(width=alt.Step(90), height=alt.Step(45),
                                                 autosize=alt.AutoSizeParams(type="pad")), width="content")


def _corpus_expectations(client, runs: pd.DataFrame) -> None:
    table = data.expectation_table(client, runs)
    if not _section("Corpus expectations (great-expectations suite)", table,
                    "No corpus expectation results in the selected runs (runs recorded before the suite ran have "
                    "none)."):
        return
    for label, group in table.groupby("run", sort=False):
        met = int(group["success"].sum())
        st.markdown(f"`{label}`: **{met} of {len(group)} expectations met** on {group['corpus'].nunique()} corpora")
    # a static table, not a data grid: every record is in the page as text
    st.table(table.assign(success=table["success"].map({True: "met", False: "FAILED"}),
                          observed=table["observed"].map(str)).set_index(["run", "corpus"]))
    st.caption("A run whose corpora fail an expectation stops before it records anything, so a recorded run shows "
               "what its corpora measured against each bound (corpus.* settings of the config).")


def _energy(runs: pd.DataFrame) -> None:
    table = data.energy_table(runs)
    if not _section("Energy and CO2 (codecarbon)", table,
                    "No energy measured in the selected runs (recorded before codecarbon, or with tracking.energy "
                    "off)."):
        return
    for row in table[table["stage"] == "total"].itertuples():
        st.markdown(f"`{row.run}`: **{_milli(row.kwh)} Wh**, **{_milli(row.kg_co2eq)} g CO2eq** on the "
                    f"{row.country or '?'} grid ({row.mode or 'mode not recorded'})")
    stages = table[table["stage"] != "total"].assign(wh=lambda t: t["kwh"] * 1000)
    st.altair_chart(alt.Chart(stages).mark_bar().encode(
        y=alt.Y("run:N", title=None, axis=alt.Axis(labelLimit=400)), x=alt.X("wh:Q", title="Wh"),
        color=alt.Color("stage:N", legend=alt.Legend(orient="bottom")), tooltip=["run", "stage", "wh", "kg_co2eq"],
    ).properties(height=max(120, 40 * stages["run"].nunique())), width="stretch")
    # a markdown table, not a data grid: every figure is in the page as text
    lines = ["| run | stage | Wh | g CO2eq |", "| --- | --- | ---: | ---: |"]
    lines += [f"| `{row.run}` | {row.stage} | {_milli(row.kwh)} | {_milli(row.kg_co2eq)} |" for row in stages.itertuples()]
    st.markdown("\n".join(lines))
    st.caption("An adapt run sums its own stages (tokenizer, fertility and source-model scoring, helper) and its "
               "methods' (initialisation, scoring, LAPT in the Ray workers); a method run shows its own. Measured "
               "offline with codecarbon: RAPL or a TDP estimate for the CPU, NVML for GPUs, an estimate for RAM.")


def _milli(value: float | None) -> str:
    """kWh as Wh, kg as g, four significant digits."""
    return "?" if value is None or pd.isna(value) else f"{value * 1000:.4g}"


def _language_matrix(client, everything: data.ExperimentRuns) -> None:
    matrices = everything.of_kind("matrix")
    if matrices.empty:
        elsewhere = data.experiments_with_matrix(client)
        if elsewhere:
            st.caption("A language matrix (`vocadapt languages`) is in experiment "
                       + ", ".join(f"`{name}`" for name in elsewhere) + ": pick it in the sidebar.")
        return
    chosen = st.sidebar.multiselect("Language matrix runs", list(matrices["label"]), list(matrices["label"]))
    table = data.language_matrix_table(everything.of_kind("language"), matrices[matrices["label"].isin(chosen)])
    if not _section("Language matrix: source vs target vs expanded tokenizer per language", table,
                    "No language rows in the selected matrix runs."):
        return
    order = list(table.sort_values("parity.source", ascending=False)["row"])  # hardest language for SmolLM2 first
    long = data.language_matrix_long(table)
    language_axis = alt.X("row:N", title="language", sort=order, axis=alt.Axis(labelAngle=0))
    measures = [m for m in data.MATRIX_FERTILITY if m in set(long["fertility"]["measure"])]
    measure = st.selectbox("Matrix measure", measures)
    shown = long["fertility"][long["fertility"]["measure"] == measure]
    st.altair_chart(alt.Chart(shown).mark_bar().encode(
        x=language_axis, y=alt.Y("value:Q", title=measure),
        color=alt.Color("tokenizer:N", sort=list(data.MATRIX_TOKENIZERS)), xOffset=alt.XOffset(
            "tokenizer:N", sort=list(data.MATRIX_TOKENIZERS)), tooltip=["row", "script", "tokenizer", "value"],
    ).properties(title=f"{measure}: SmolLM2's tokenizer (source), a replaced target one, SmolLM2's expanded"),
        width="stretch")
    left, right = st.columns(2)
    left.altair_chart(alt.Chart(long["speed_up"]).mark_bar().encode(
        x=language_axis, y=alt.Y("speed_up:Q", title="speed-up over the source (x)"),
        color=alt.Color("measure:N", legend=alt.Legend(orient="bottom", labelLimit=400)), xOffset="measure:N",
        tooltip=["row", "measure", "speed_up"],
    ).properties(title="Generation speed-up of the fvt model") + alt.Chart(pd.DataFrame({"y": [1.0]})).mark_rule(
        strokeDash=[4, 4]).encode(y="y:Q"), width="stretch")
    right.altair_chart(alt.Chart(long["bpb"]).mark_bar().encode(
        x=language_axis, y=alt.Y("bpb:Q", title="bits per byte (zero-shot)"),
        color=alt.Color("model:N", sort=list(data.MATRIX_BPB), legend=alt.Legend(orient="bottom")),
        xOffset=alt.XOffset("model:N", sort=list(data.MATRIX_BPB)), tooltip=["row", "model", "bpb"],
    ).properties(title="Held-out bits per byte: source model, fvt and random rows"), width="stretch")
    columns = ["row", "script", "train_lines", "dropped_language_id",
               *(f"{m}.{t}" for m in ("tokens_per_character", "tokens_per_word", "parity")
                 for t in data.MATRIX_TOKENIZERS if not (m == "tokens_per_word" and t == "expanded")),
               *(f"bpb.{m}" for m in data.MATRIX_BPB), "source_over_target_tokens",
               "speed_up.characters_per_second", "speed_up.equal_content", "matrix"]
    st.dataframe(table.set_index("row").loc[order, columns[1:]], width="stretch")
    st.caption("Parity: tokens for held-out paragraphs / SmolLM2's tokens for their English side. tokens_per_word "
               "is empty where words are not delimited. source_over_target_tokens: how many times fewer tokens the "
               "target tokenizer needs for the same paragraphs.")


def _leaderboard(everything: data.ExperimentRuns) -> None:
    """``vocadapt leaderboard`` runs: initialisers ranked by zero-shot bits per byte (the latest finished shown)."""
    runs = everything.of_kind("leaderboard")
    if runs.empty:
        return
    finished = _finished(runs)
    chosen = st.sidebar.multiselect("Leaderboard runs", list(runs["label"]), finished[-1:])
    table = data.leaderboard_table(runs[runs["label"].isin(chosen)])
    if not _section("Initialiser leaderboard: zero-shot bits per byte (lower is better)", table,
                    "No leaderboard metrics in the selected runs."):
        return
    streams = [column for column in table.columns if column.startswith("bpb_")]  # bpb_target_<code>: a language each
    long = table.melt(id_vars=["run", "method", "rank"], value_vars=streams,
                      var_name="stream", value_name="bpb").dropna(subset=["bpb"])
    long["stream"] = long["stream"].map(lambda stream: {"bpb_target": "target language",
                                                        "bpb_source": "source language"}.get(
        stream, f"target language {stream.removeprefix('bpb_target_')}"))
    order = list(dict.fromkeys(table["method"]))
    st.altair_chart(alt.Chart(long).mark_bar().encode(
        y=alt.Y("method:N", sort=order, title=None), x=alt.X("bpb:Q", title="bits per byte"),
        yOffset="stream:N", color=alt.Color("stream:N", legend=alt.Legend(orient="top")),
        column=alt.Column("run:N", title=None), tooltip=["run", "rank", "method", "stream", "bpb"],
    ).properties(width=420, height=24 * len(order) * len(streams)))
    st.dataframe(table, hide_index=True)


def _registry(client) -> None:
    table = data.registered_models(client)
    if not _section("Registered models", table, "No registered models."):
        return
    st.dataframe(table)
    lineage = [column for column in table.columns if column not in ("model", "version", "aliases", "run_id")]
    for _, row in table[table["aliases"] != ""].iterrows():
        tags = ", ".join(f"{key} {row[key]}" for key in lineage if pd.notna(row[key]) and str(row[key]))
        st.markdown(f"`{row['model']}` v{row['version']}: **{row['aliases']}**" + (f" ({tags})" if tags else ""))


main()
