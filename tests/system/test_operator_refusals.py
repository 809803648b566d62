"""What a durable AgentOperator refuses at the start of a real task."""

from __future__ import annotations

import pytest
from dag_runs import TEST_DAGS, latest_run_id, openai_connection, run_dag_file, task_states

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_3_PLUS


@pytest.mark.skipif(AIRFLOW_V_3_3_PLUS, reason="Airflow 3.3+ keeps the journal in the task state store")
def test_without_durable_cache_path_before_airflow_3_3_the_task_fails_naming_the_option_before_any_model_call(
    tmp_path,
):
    with FakeOpenAIServer([reply.text("never sent")]) as server:
        run = run_dag_file(
            TEST_DAGS / "durable_cleared.py",
            {
                "AIRFLOW_CONN_OPENAI_DEFAULT": openai_connection(server),
                "AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH": "",
                "DURABLE_TEST_OUT": str(tmp_path),
            },
        )
    assert task_states("durable_cleared", latest_run_id("durable_cleared")) == {("triage", -1): ("failed", 1)}
    assert (
        "Durable execution needs [common.ai] durable_cache_path on Airflow before 3.3: set it to an ObjectStorage "
        "URI, for example AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH=file:///tmp/airflow_durable_cache" in run.output
    )
    assert server.requests == []


@pytest.mark.skipif(AIRFLOW_V_3_3_PLUS, reason="Airflow 3.3+ keeps the journal in the task state store")
def test_a_cache_path_a_retry_would_meet_again_fails_the_task_for_good_without_spending_its_retry(tmp_path):
    # A @task with retries=1 around run_durably_sync: the option is refused as the journal is bound.
    with FakeOpenAIServer([reply.text("never sent")]) as server:
        run = run_dag_file(
            TEST_DAGS / "durable_two_agents.py",
            {
                "FAKE_OPENAI_BASE_URL": server.base_url,
                "AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH": "file://relative/journals",
                "DURABLE_TEST_OUT": str(tmp_path),
            },
        )
    assert task_states("durable_two_agents", latest_run_id("durable_two_agents")) == {
        ("forecast_and_report", -1): ("failed", 1)
    }
    assert "[common.ai] durable_cache_path 'file://relative/journals' is not an absolute local path" in run.output
    assert server.requests == []
