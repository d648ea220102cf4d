"""The promotion story's pure joins: an adapt run's figures beside its source model's, gate rows, alias events."""

from __future__ import annotations

import json

import pytest

from vocadapt.dashboards import promotion

PARENT = {"source_model.benchmark.side_by_side_cloze_xx.acc_bytes": 0.50, "source_model.bpb_ood_target": 2.0,
          "source_model.generation.tokens_per_character": 0.40, "source_model.bpb_target": 1.9,
          "source_model.parameters.total": 1000.0, "fertility.source_tokenizer.xx.tokens_per_word": 2.0}
METHODS = {"fvt": {"benchmark.side_by_side_cloze_xx.acc_bytes": 0.55, "bpb_ood_target": 2.1,
                   "generation.tokens_per_character": 0.30, "generation.same_text_token_saving": 0.2,
                   "bpb_target_zero_shot": 2.5, "bpb_target_after_lapt": 1.8, "parameters.total": 900.0,
                   "init_seconds": 3.0},
           "random": {"bpb_target_zero_shot": 4.0}}


def test_every_method_figure_sits_beside_the_source_models():
    rows = promotion.side_by_side_rows(PARENT, METHODS, "run-a").set_index(["model", "measure"])
    assert rows.loc[("fvt", "cloze_xx acc_bytes"), "source"] == 0.50
    assert rows.loc[("fvt", "cloze_xx acc_bytes"), "difference"] == pytest.approx(0.05)
    assert rows.loc[("fvt", "tokens_per_character"), "difference"] == pytest.approx(-0.10)
    assert rows.loc[("fvt", "parameters total"), "source"] == 1000.0
    # the method's held-out bits per byte after LAPT, not step 0, against the source's
    assert rows.loc[("fvt", "held-out bpb target"), "value"] == 1.8
    assert rows.loc[("random", "held-out bpb target"), "value"] == 4.0
    assert rows.loc[("source model", "bpb_ood_target"), "value"] == 2.0
    # a figure only the method has (a floor, no source value) is shown without a difference
    saving = rows.loc[("fvt", "same_text_token_saving")]
    assert saving["value"] == 0.2 and pd_isna(saving["source"]) and pd_isna(saving["difference"])
    assert not [m for m in rows.index.get_level_values("measure") if "init_seconds" in m or "fertility" in m]
    table = promotion.wide(promotion.side_by_side_rows(PARENT, METHODS, "run-a"))
    assert list(table.columns) == ["run-a: source model", "run-a: fvt", "run-a: random"]
    assert table.loc["bpb_ood_target", "run-a: fvt"] == 2.1


def pd_isna(value) -> bool:
    import pandas as pd

    return bool(pd.isna(value))


def test_gate_rows_carry_the_interval_and_verdict():
    from vocadapt.components.evaluation.bootstrap import ItemParts
    from vocadapt.platform.registry.gates import PromotionGates, evaluate_gates

    ids = tuple(f"d{i}" for i in range(6))
    items = {"bpb_ood_target": ItemParts("ratio", [[2.0, 1.0]] * 6, ids),
             "source_model.bpb_ood_target": ItemParts("ratio", [[2.2, 1.0], [1.8, 1.0]] * 3, ids)}
    results = evaluate_gates({"bpb_ood_target": 2.0, "source_model.bpb_ood_target": 2.0}, PromotionGates(), "xx",
                             items)
    frame = promotion.gate_frame(results).set_index("gate")
    target = frame.loc["target bits per byte"]
    assert target["measured"] == 2.0 and target["source"] == 2.0 and target["difference"] == 0.0
    assert target["low"] < 0 < target["high"] and target["verdict"] == "undecided"  # estimate within noise
    assert frame.loc["source-language bits per byte", "verdict"] == "fail"  # not measured


def test_alias_events_tell_promotions_refusals_and_rollbacks_in_order():
    versions = {
        1: {"vocadapt.promotion.champion.decision": "accepted", "vocadapt.promotion.champion.at": "2026-01-01T10:00",
            "vocadapt.promotion.champion.by": "ann", "vocadapt.promotion.champion.previous": "",
            "vocadapt.promotion.champion.restored_at": "2026-01-03T10:00"},
        2: {"vocadapt.promotion.champion.decision": "accepted", "vocadapt.promotion.champion.at": "2026-01-02T10:00",
            "vocadapt.promotion.champion.by": "bob", "vocadapt.promotion.champion.previous": "1",
            "vocadapt.rollback.champion": json.dumps({"at": "2026-01-03T10:00", "by": "ann", "to": 1})},
        3: {"vocadapt.promotion.champion.decision": "refused", "vocadapt.promotion.champion.at": "2026-01-02T12:00",
            "vocadapt.promotion.champion.by": "bob"},
    }
    events = promotion.alias_events("m", {"vocadapt.alias_history.champion": "[1]"}, {"champion": "1",
                                                                                       "candidate": "3"}, versions)
    assert list(zip(events["version"], events["event"], events["decision"])) == [
        (1, "promotion", "accepted"), (2, "promotion", "accepted"), (3, "promotion", "refused"),
        (2, "rolled back", ""), (1, "restored by rollback", ""), (1, "now", ""), (3, "now", "")]
    assert events.iloc[1]["detail"] == "from version 1" and events.iloc[3]["detail"] == "to version 1"
    assert events.iloc[-1]["alias"] == "candidate" and events.iloc[-2]["detail"] == "history 1"


def _app(filled_store, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from vocadapt.cli.commands.dashboard import app_path

    monkeypatch.setenv("MLFLOW_TRACKING_URI", filled_store)
    monkeypatch.setenv("VOCADAPT_DASHBOARD_EXPERIMENT", "kestrel-experiment")
    return AppTest.from_file(str(app_path()), default_timeout=120).run()


def test_app_shows_each_method_beside_the_source_model(filled_store, monkeypatch):
    from tests.dashboard.fake_store import ADAPT_RUN, SOURCE_SIDE_BY_SIDE, method_side_by_side
    from vocadapt.dashboards.promotion_view import figure

    app = _app(filled_store, monkeypatch)
    assert not app.exception
    assert any("Side by side with the source model" in h.value for h in app.header)
    text = "\n".join(m.value for m in app.markdown)
    def cells(line: str) -> list[str]:
        return [cell.strip() for cell in line.strip().strip("|").split("|")]

    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| measure |"))
    header = cells(lines[start])
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows[cells(line)[0]] = dict(zip(header, cells(line)))
    sava, source = f"{ADAPT_RUN}: sava", f"{ADAPT_RUN}: source model"
    assert rows["translation_en_xx chrf"][sava] == figure(method_side_by_side(1)["benchmark.side_by_side_translation_en_xx.chrf"])
    assert figure(method_side_by_side(1)["parameters.total"]) == "120,001" == rows["parameters total"][sava]
    assert rows["held-out bpb target"][source] == "1.3500"
    assert all(any(row.get(source) == figure(value) for row in rows.values()) for value in SOURCE_SIDE_BY_SIDE.values())
    assert not any("No evaluation runs selected" in i.value for i in app.info)


def test_promotion_view_shows_the_gates_and_the_recorded_decision(filled_store, monkeypatch):
    from tests.dashboard.fake_store import REGISTERED

    app = _app(filled_store, monkeypatch)
    app.sidebar.radio[0].set_value("Promotion").run()
    assert not app.exception
    headers = [h.value for h in app.header]
    assert f"{REGISTERED} version 1: gates against the source model" in headers
    text = "\n".join(m.value for m in app.markdown)
    assert "| target bits per byte | 2.2500 | 2.2500 |" in text  # sava's out-of-domain bpb vs the source's
    assert "**fail**" in text and "no interval" in text
    history = [line for line in text.splitlines() if line.startswith(("| champion |", "| candidate |"))]
    assert history[0].startswith("| champion | 1 | promotion |") and "| refused |" in history[0]
    assert history[1].startswith("| candidate | 1 | now |") and len(history) == 2


def test_several_adapt_runs_share_the_same_axes():
    import pandas as pd

    adapt = pd.DataFrame([{"run_id": "a", "label": "it-fvt-8k", "metrics": PARENT},
                          {"run_id": "b", "label": "hi-sava-16k", "metrics": {**PARENT, "source_model.bpb_ood_target": 3.0}}])
    methods = pd.DataFrame([{"run_id": "a1", "parent_run_id": "a", "method": "fvt", "label": "x", "metrics": METHODS["fvt"]},
                            {"run_id": "b1", "parent_run_id": "b", "method": "sava", "label": "y",
                             "metrics": {**METHODS["fvt"], "bpb_ood_target": 2.7}}])
    table = promotion.side_by_side_table(adapt, methods)
    ood = table[table["measure"] == "bpb_ood_target"].set_index(["run", "model"])
    assert ood.loc[("hi-sava-16k", "sava"), "difference"] == pytest.approx(-0.3)  # against its own source model
    assert ood.loc[("it-fvt-8k", "fvt"), "difference"] == pytest.approx(0.1)
    assert list(promotion.wide(table).columns) == ["hi-sava-16k: source model", "hi-sava-16k: sava",
                                                   "it-fvt-8k: source model", "it-fvt-8k: fvt"]
