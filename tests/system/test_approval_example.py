"""
The approval example, run as its users run it: ``python example_dags/example_durable_approval.py``
(``dag.test()``), answered through the REST API of an api-server on the same database, as the
example's docstring says. ``dag.test()`` runs the approval trigger in its own process, which cannot
read answers, so the task waits in ``awaiting_input`` instead (Airflow 3.3). It waits for the
answer, then replays the lookup and both model calls, and refunds once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
from typing import Any

import pytest

from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_2_PLUS

if not AIRFLOW_V_3_2_PLUS:
    pytest.skip("approvals need Airflow's human-in-the-loop (3.2+)", allow_module_level=True)
from airflow_services import AIRFLOW, AirflowServices, _in_own_group_ending_with_this_process
from dag_runs import EXAMPLE_DAGS, ROOT, durable_env, journal_entries, latest_run_id, xcom_return_value

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_3_PLUS

DAG_ID, TASK = "example_durable_approval", "handle_refund"


class ApiServer(AirflowServices):
    """Only the api-server: ``dag.test()`` is the scheduler and the worker here."""

    def __enter__(self) -> ApiServer:
        self.logs.mkdir(parents=True, exist_ok=True)
        self._processes["api-server"] = subprocess.Popen(
            [AIRFLOW, "api-server", "--port", self.env["AIRFLOW__API__PORT"]],
            env=self.env,
            stdout=(self.logs / "api-server.log").open("w"),
            stderr=subprocess.STDOUT,
            preexec_fn=_in_own_group_ending_with_this_process,
        )
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                if self._request("GET", "/api/v2/monitor/health")["metadatabase"]["status"] == "healthy":
                    return self
            except OSError:
                time.sleep(1)
        self.__exit__()
        raise TimeoutError(f"the api-server did not start:\n{self.service_log('api-server')[-3000:]}")

    def request_shown(self, run_id: str, timeout: float = 240) -> dict[str, Any]:
        """
        The human-in-the-loop request of the example's task, once the task waits for it.

        Not as soon as the request exists: on SQLite Airflow's row locks are no-ops, so an answer
        in the instant between the task creating its request and parking can be stored while the
        task still runs, and the task then parks for an answer already given.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.task_instance(DAG_ID, run_id, TASK)["state"] == "awaiting_input":
                    return self._request(
                        "GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{TASK}/-1/hitlDetails"
                    )
            except urllib.error.HTTPError as error:
                if error.code != 404:
                    raise
            time.sleep(0.5)
        raise TimeoutError(f"the example did not wait for an answer in {timeout} s")


@pytest.fixture
def api_server(tmp_path, airflow_db):
    with ApiServer(EXAMPLE_DAGS, tmp_path / "service_logs", {}) as server:
        yield server


@pytest.mark.skipif(
    not AIRFLOW_V_3_3_PLUS,
    reason="dag.test() runs the approval trigger beside a stand-in supervisor that cannot read answers; on 3.2 the "
    "task has no awaiting_input to wait in instead (it fails naming the fix); test_approvals_in_airflow.py runs "
    "3.2 under a triggerer",
)
def test_the_approval_example_waits_for_the_answer_then_replays_and_refunds_once(tmp_path, api_server):
    script = [
        reply.tool_calls(("lookup_order", {"order_id": "O-77"}, "call_lookup")),
        reply.tool_calls(("issue_refund", {"order_id": "O-77", "amount_eur": 40.0}, "call_refund")),
        reply.text("Refunded the second payment of 40 EUR on order O-77."),
    ]
    environ = {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"}
    with FakeOpenAIServer(script) as server:
        env = {**environ, "AIRFLOW__CORE__DAGS_FOLDER": str(EXAMPLE_DAGS), **durable_env(server, tmp_path)}
        example = subprocess.Popen(
            [sys.executable, str(EXAMPLE_DAGS / "example_durable_approval.py")],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            deadline = time.monotonic() + 120
            while (run_id := latest_run_id(DAG_ID)) is None and time.monotonic() < deadline:
                time.sleep(0.5)
            assert run_id is not None
            shown = api_server.request_shown(run_id)
            assert shown["subject"] == "Agent 'support' asks to run issue_refund"
            assert '"amount_eur": 40.0' in shown["body"]
            assert len(server.requests) == 2

            api_server._request(
                "PATCH",
                f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{TASK}/-1/hitlDetails",
                {"chosen_options": ["Approve"], "params_input": {}},
            )
            output, _ = example.communicate(timeout=300)
        finally:
            if example.poll() is None:
                example.kill()
                example.communicate()

    assert example.returncode == 0, output[-5000:]
    # Two requests before the stop; after the answer both replay and one new request follows.
    assert [r.status for r in server.requests] == [200, 200, 200]
    assert output.count("Tool lookup_order ran") == 1
    assert output.count("Tool issue_refund ran") == 1
    assert "Durable: issue_refund approved by" in output
    assert xcom_return_value(DAG_ID, run_id, TASK) == "Refunded the second payment of 40 EUR on order O-77."
    assert [entry for entry in journal_entries(DAG_ID, run_id, tmp_path) if "summar" not in entry] == []
