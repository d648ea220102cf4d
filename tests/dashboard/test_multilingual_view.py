"""The dashboard and the leaderboard show each target language of a multilingual run: its held-out and
out-of-domain bits per byte, its generation and side-by-side scores, its leaderboard column. The store is written
the way adapt and leaderboard log (params, metric names); language codes are real, run names made up."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(300)

LANGUAGES = ("it", "de", "ru")
ADAPT_RUN = "heron-adapt"
LEADERBOARD_RUN = "heron/leaderboard"


def _language_metrics(prefix: str, offset: float) -> dict[str, float]:
    """Per-language side-by-side metrics as pipelines/side_by_side.py names them (the first language under the
    one-language names), each language's value distinct: 1 + position / 10 + offset."""
    metrics = {}
    for position, code in enumerate(LANGUAGES):
        stream, scope = ("target", "") if position == 0 else (f"target_{code}", f"{code}.")
        value = 1 + position / 10 + offset
        metrics |= {f"{prefix}bpb_ood_{stream}": value, f"{prefix}generation.{scope}tokens_per_character": value / 4,
                    f"{prefix}benchmark.side_by_side_cloze_{code}.acc_bytes": value / 3}
    return metrics | {f"{prefix}bpb_ood_source": 0.9}


@pytest.fixture(scope="module")
def multilingual_store(tmp_path_factory) -> str:
    from vocadapt.pipelines.leaderboard import LEADERBOARD_TAG, LeaderboardResult, LeaderboardRow, log_leaderboard, rank
    from tests.dashboard.fake_store import sqlite_tracker

    uri, tracker = sqlite_tracker(tmp_path_factory.mktemp("multilingual-store"), "heron-multilingual")
    params = {"target.languages": str(list(LANGUAGES)), "target.source_language": "en"}  # as config.flat() logs
    with tracker.run(ADAPT_RUN, tags={"vocadapt.target_language": "it"}) as parent:
        tracker.log_params(parent.info.run_id, params)
        tracker.log_metrics(parent.info.run_id, {"source_model.bpb_target": 1.3, "source_model.bpb_target_de": 1.4,
                                                 "source_model.bpb_target_ru": 1.5, "source_model.bpb_source": 1.0,
                                                 "fertility.target_tokenizer.ru.tokens_per_word": 2.3}
                            | _language_metrics("source_model.", 1.0))
        with tracker.run(f"{ADAPT_RUN}/fvt", parent_run_id=parent.info.run_id) as child:
            tracker.log_params(child.info.run_id, {"method": "fvt"})
            tracker.log_metrics(child.info.run_id, {"bpb_target_zero_shot": 2.0, "bpb_target_de_zero_shot": 2.1,
                                                    "bpb_target_ru_zero_shot": 2.2, "bpb_source_zero_shot": 1.1}
                                | _language_metrics("", 0.0))
    with tracker.run(LEADERBOARD_RUN, tags={LEADERBOARD_TAG: "zero-shot"}) as parent:
        rows = [LeaderboardRow(method, f"run-{method}", {"target": target, "target_de": german, "source": 1.0}, 1.0)
                for method, target, german in (("fvt", 1.6, 1.9), ("random", 1.5, 2.4))]
        tracker.log_metrics(parent.info.run_id, {"source_model.bpb_target": 1.3, "source_model.bpb_target_de": 1.4,
                                                 "source_model.bpb_source": 1.0})
        log_leaderboard(tracker, parent.info.run_id, LeaderboardResult(
            parent.info.run_id, tracker.experiment_id, uri, {"target": 1.3, "target_de": 1.4, "source": 1.0},
            rank(rows), {}, {"target": "it", "target_de": "de", "source": "en"}))
    return uri


def test_each_language_has_its_rows_of_scores_and_bits_per_byte(multilingual_store):
    from vocadapt.dashboards import runs as data

    everything = data.load_runs(data.client_for(multilingual_store), "heron-multilingual")
    adapt = everything.of_kind("adapt")
    methods = everything.frame[everything.frame["parent_run_id"].isin(adapt["run_id"])]
    table = data.language_scores_table(methods, adapt).set_index(["model", "language"])
    source = f"source model ({ADAPT_RUN})"
    for position, code in enumerate(LANGUAGES):
        assert table.loc[(f"{ADAPT_RUN}/fvt", code), "ood_bpb"] == pytest.approx(1 + position / 10)
        assert table.loc[(source, code), "tokens_per_character"] == pytest.approx((2 + position / 10) / 4)
        assert table.loc[(source, code), "cloze_acc_bytes"] == pytest.approx((2 + position / 10) / 3)
    bits = data.bits_per_byte_table(methods, adapt)
    assert {"it (target)", "de (target)", "ru (target)", "en (source)"} <= set(bits["stream"])
    russian = bits[(bits["stream"] == "ru (target)") & (bits["model"] == f"{ADAPT_RUN}/fvt")]
    assert list(russian["bpb"]) == [pytest.approx(2.2)]


def test_the_leaderboard_ranks_on_the_mean_and_shows_a_column_per_language(multilingual_store):
    from vocadapt.dashboards import runs as data
    from vocadapt.pipelines.leaderboard import LeaderboardResult, LeaderboardRow, markdown_table, rank

    rows = rank([LeaderboardRow("fvt", "a", {"target": 1.6, "target_de": 1.9, "source": 1.0}, 1.0),
                 LeaderboardRow("random", "b", {"target": 1.5, "target_de": 2.4, "source": 1.0}, 1.0)])
    assert [row.method for row in rows] == ["fvt", "random"]  # random is better in it, worse on the mean
    text = markdown_table(LeaderboardResult("p", "e", "u", {"target": 1.3, "target_de": 1.4, "source": 1.0}, rows,
                                            {}, {"target": "it", "target_de": "de", "source": "en"}))
    assert "| it bits per byte | de bits per byte | en bits per byte | vs source model (mean of it, de) |" in text
    assert "| 1 | fvt | 1.600 | 1.900 | 1.000 | +0.400 |" in text

    everything = data.load_runs(data.client_for(multilingual_store), "heron-multilingual")
    table = data.leaderboard_table(everything.of_kind("leaderboard")).set_index("method")
    assert table.loc["random", "bpb_target_de"] == pytest.approx(2.4)
    assert table.loc["source model (own tokenizer)", "bpb_target_de"] == pytest.approx(1.4)
    assert list(table.index[:2]) == ["fvt", "random"]


def test_app_shows_a_section_per_target_language(multilingual_store, monkeypatch):
    from tests.dashboard.fake_store import run_dashboard

    app = run_dashboard(multilingual_store, monkeypatch)
    assert any("per target language" in header.value.lower() for header in app.header)
    shown = next(frame.value for frame in app.dataframe if "ood_bpb" in frame.value.columns)
    assert set(shown["language"]) == set(LANGUAGES)
    board = next(frame.value for frame in app.dataframe if "bpb_target_de" in frame.value.columns)
    assert "random" in set(board["method"])
