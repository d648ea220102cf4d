"""The sweep's leaderboard ranks finished trials on out-of-domain target text (what the default promotion gate reads)
when every finished trial scored it, and on the held-out split otherwise."""

from __future__ import annotations

from types import SimpleNamespace

from vocadapt.pipelines.sweep import leaderboard, leaderboard_markdown, ranking_metric


def trial(trial_id: str, held_out: float, out_of_domain: float | None = None, final: bool = True):
    metrics = {"trial_id": trial_id, "bpb_target": held_out, "bpb_source": 1.4, "final": final,
               "training_iteration": 2, "method": "align", "lineage": "{}"}
    if out_of_domain is not None:
        metrics["bpb_ood_target"] = out_of_domain
    return SimpleNamespace(metrics=metrics, error=None, path=f"/sweep/{trial_id}",
                           config={"lapt.head_fit_after": trial_id == "head-fit"})


def test_finished_trials_rank_out_of_domain_when_each_has_that_score():
    # the pattern measured on an H200: the head fit better held out, worse out of domain
    rows = leaderboard([trial("head-fit", 2.749, 3.092), trial("distilled", 2.880, 2.716),
                        trial("stopped", 2.5, final=False)])
    assert ranking_metric(rows) == "bpb_ood_target"
    assert [row["trial_id"] for row in rows] == ["distilled", "head-fit", "stopped"]
    table = leaderboard_markdown(rows)
    assert "| bpb_target | bpb_ood_target | bpb_source |" in table and "2.7160" in table


def test_held_out_ranks_when_a_finished_trial_has_no_out_of_domain_score():
    rows = leaderboard([trial("head-fit", 2.749, 3.092), trial("distilled", 2.880)])
    assert ranking_metric(rows) == "bpb_target"
    assert [row["trial_id"] for row in rows] == ["head-fit", "distilled"]
