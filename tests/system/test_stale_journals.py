"""
Journals that no try will replay can be removed (R-24): on Airflow 3.3+ with the DAG run (the
task state store rows cascade), before 3.3 with the clean-up the docs give for the cache path.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from dag_runs import ROOT, TEST_DAGS, durable_env, journal_entries, latest_run_id, run_dag_file, task_states

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_3_PLUS

AIRFLOW = str(Path(sys.executable).with_name("airflow"))


def run_that_failed_for_good(tmp_path) -> str:
    """Runs durable_cleared (no retries) into an outage on its second model request; returns the run id."""
    script = [reply.tool_calls(("lookup_ticket", {"ticket_id": "T-5"}, "call_lookup"))]
    with FakeOpenAIServer(script, fail_requests={2}) as server:
        run = run_dag_file(
            TEST_DAGS / "durable_cleared.py",
            {**durable_env(server, tmp_path), "DURABLE_TEST_OUT": str(tmp_path)},
        )
    run_id = latest_run_id("durable_cleared")
    assert task_states("durable_cleared", run_id) == {("triage", -1): ("failed", 1)}, run.output[-5000:]
    assert journal_entries("durable_cleared", run_id, tmp_path) != []
    return run_id


@pytest.mark.skipif(not AIRFLOW_V_3_3_PLUS, reason="the task state store arrived in Airflow 3.3")
def test_the_journal_of_a_task_that_failed_for_good_goes_with_its_dag_run_when_airflow_db_clean_removes_it(
    tmp_path,
):
    run_id = run_that_failed_for_good(tmp_path)

    tomorrow = (datetime.now(timezone.utc) + timedelta(days=1)).strftime("%Y-%m-%d")
    subprocess.run(
        [AIRFLOW, "db", "clean", "--tables", "dag_run", "--dag-ids", "durable_cleared"]
        + ["--clean-before-timestamp", tomorrow, "--yes", "--skip-archive"],
        env={key: value for key, value in os.environ.items() if key != "AIRFLOW__CORE__UNIT_TEST_MODE"},
        check=True,
        capture_output=True,
        timeout=120,
    )

    assert task_states("durable_cleared", run_id) == {}
    assert journal_entries("durable_cleared", run_id, tmp_path) == []


@pytest.mark.skipif(AIRFLOW_V_3_3_PLUS, reason="durable_cache_path is used before Airflow 3.3")
def test_the_documented_cache_clean_up_removes_old_dag_runs_journals_and_keeps_recent_ones(tmp_path):
    run_that_failed_for_good(tmp_path)
    cache = tmp_path / "durable_cache"
    [old_run] = cache.glob("dag_id=durable_cleared/run_id=*")
    forty_days_ago = time.time() - 40 * 24 * 3600
    for path in old_run.rglob("*"):
        os.utime(path, (forty_days_ago, forty_days_ago))
    recent = cache / "dag_id=other" / "run_id=recent" / "task_id=t" / "map_index=-1" / "1.1"
    recent.parent.mkdir(parents=True)
    recent.write_text("{}")

    subprocess.run(
        ["bash", str(ROOT / "docs" / "clean_durable_cache.sh")],
        env={**os.environ, "CACHE": str(cache), "DAYS": "30"},
        check=True,
        timeout=60,
    )

    assert not old_run.exists()
    assert not (cache / "dag_id=durable_cleared").exists()
    assert recent.exists()
