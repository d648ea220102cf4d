"""Every task a cluster suite names resolves in the installed lm-eval's TaskManager (no download needed)."""

from __future__ import annotations

import pytest
import yaml

from vocadapt.platform.evaluation.harness import task_manager, unresolved_tasks
from vocadapt.platform.evaluation.suites import TASKS_DIR, available_suites, load_suite


@pytest.mark.timeout(300)
def test_cluster_suite_tasks_resolve_in_lm_eval():
    # indexing lm-eval's ~15k tasks takes tens of seconds on 2 cores: one manager for every suite
    manager = task_manager(TASKS_DIR, include_defaults=True)
    cluster = [load_suite(name) for name in available_suites() if load_suite(name).kind == "cluster"]
    assert cluster, "no cluster suite shipped"
    for suite in cluster:
        assert unresolved_tasks(suite.tasks, manager) == [], suite.name
    assert unresolved_tasks(["vocadapt_no_such_task"], manager) == ["vocadapt_no_such_task"]


def test_our_flores_tasks_use_sava_prompts_and_chrf():
    for direction, header in (("en_it", "Traduci dall'Inglese all'Italiano"), ("it_en", "Translate from Italian")):
        spec = yaml.safe_load((TASKS_DIR / f"vocadapt_flores_{direction}.yaml").read_text())
        assert spec["description"].startswith(header) and spec["doc_to_text"].startswith("Text: ")
    common = yaml.safe_load((TASKS_DIR / "_vocadapt_flores_common_yaml").read_text())
    assert common["metric_list"][0]["metric"] == "chrf" and common["generation_kwargs"]["do_sample"] is False
