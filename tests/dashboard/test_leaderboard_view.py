"""The dashboard's leaderboard view on runs logged by the leaderboard pipeline's own logging code."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(300)

SCORES = {"kestrel": (1.9, 2.6), "osprey": (1.7, 2.9), "merlin": (2.4, 2.2)}  # made-up method names and scores


@pytest.fixture(scope="module")
def leaderboard_store(tmp_path_factory) -> str:
    from vocadapt.pipelines.leaderboard import LEADERBOARD_TAG, LeaderboardResult, LeaderboardRow, log_leaderboard, rank
    from tests.dashboard.fake_store import sqlite_tracker

    uri, tracker = sqlite_tracker(tmp_path_factory.mktemp("leaderboard-store"), "falcon-leaderboards")
    with tracker.run("falcon/leaderboard", tags={LEADERBOARD_TAG: "zero-shot"}) as parent:
        rows = []
        for method, (target, source) in SCORES.items():
            with tracker.run(f"falcon/leaderboard/{method}", parent_run_id=parent.info.run_id) as child:
                tracker.log_params(child.info.run_id, {"method": method})
                tracker.log_metrics(child.info.run_id, {"bpb_target_zero_shot": target, "bpb_source_zero_shot": source})
            rows.append(LeaderboardRow(method, child.info.run_id, {"target": target, "source": source}, 1.5))
        tracker.log_metrics(parent.info.run_id, {"source_model.bpb_target": 2.0, "source_model.bpb_source": 1.1})
        result = LeaderboardResult(parent.info.run_id, tracker.experiment_id, uri, {"target": 2.0, "source": 1.1},
                                   rank(rows), {"sava": "needs a helper"}, {"target": "xx", "source": "en"})
        log_leaderboard(tracker, parent.info.run_id, result)
    return uri


def test_leaderboard_rows_are_read_from_the_parent_metrics(leaderboard_store):
    from vocadapt.dashboards import runs as data

    everything = data.load_runs(data.client_for(leaderboard_store), "falcon-leaderboards")
    assert list(everything.of_kind("leaderboard")["name"]) == ["falcon/leaderboard"]
    table = data.leaderboard_table(everything.of_kind("leaderboard"))
    assert list(table["method"]) == ["osprey", "kestrel", "merlin", "source model (own tokenizer)"]
    assert list(table["rank"].iloc[:3]) == [1, 2, 3] and table["rank"].isna().iloc[3]
    assert table.set_index("method").loc["merlin", "bpb_source"] == pytest.approx(2.2)


def test_app_shows_the_leaderboard(leaderboard_store, monkeypatch):
    from tests.dashboard.fake_store import run_dashboard

    app = run_dashboard(leaderboard_store, monkeypatch)
    assert any("leaderboard" in header.value.lower() for header in app.header)
    shown = next(frame.value for frame in app.dataframe if "method" in frame.value.columns)
    assert list(shown["method"])[:3] == ["osprey", "kestrel", "merlin"]
