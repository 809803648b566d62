"""
Approvals in durable Pydantic AI runs (R-39, R-40, R-54, R-56 ``ask``, R-65) under a real scheduler,
api-server and triggerer: the task stops at the refund of a ``requires_approval=True`` tool, waits
without a worker, a person answers through Airflow's public REST API, at once or later, and the task
resumes, replaying what it did before the stop. Each test asserts the model server's requests and
each tool's real runs (``dags/durable_pydantic_ai_approval.py`` notes them).
"""

from __future__ import annotations

import os
import signal
import time
import urllib.error
from pathlib import Path

import pytest

pytest.importorskip(
    "pydantic_ai.models.openai", reason="Pydantic AI is the optional extra [pydantic-ai], not installed here"
)
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_2_PLUS

if not AIRFLOW_V_3_2_PLUS:
    pytest.skip("approvals need Airflow's human-in-the-loop (3.2+)", allow_module_level=True)

from dag_runs import TEST_DAGS, durable_env, xcom_return_value
from pydantic_ai import ToolDenied
from test_approvals_in_airflow import TASK, ServicesWithTriggerer, journal_left, tool_outputs, tool_runs

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply

DAG_ID = "durable_pydantic_ai_approval"
ASK_DAG_ID = "durable_pydantic_ai_in_flight_ask"
LOOKUP = reply.tool_calls(("lookup_order", {"order_id": "O-77"}, "call_lookup"))
REFUND = reply.tool_calls(("issue_refund", {"order_id": "O-77", "amount_eur": 40}, "call_refund"))


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pydantic_ai_approval_out")


@pytest.fixture(scope="module")
def server():
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def airflow(server, out, tmp_path_factory, airflow_db):
    dags = tmp_path_factory.mktemp("pydantic_ai_approval_dags")
    (dags / "durable_pydantic_ai_approval.py").symlink_to(TEST_DAGS / "durable_pydantic_ai_approval.py")
    env = {**durable_env(server, out), "DURABLE_TEST_OUT": str(out)}
    with ServicesWithTriggerer(dags, tmp_path_factory.mktemp("service_logs"), env) as services:
        yield services


def answer_when_asked(airflow: ServicesWithTriggerer, dag_id: str, run_id: str, option: str, delay: float) -> None:
    """Answer ``delay`` seconds after the request appears in the REST API, whatever the task is doing then."""
    path = airflow.hitl_path(dag_id, run_id)
    deadline = time.monotonic() + 300
    while True:
        try:
            airflow._request("GET", path)
            break
        except urllib.error.HTTPError as error:
            if error.code != 404 or time.monotonic() > deadline:
                raise
        time.sleep(0.2)
    time.sleep(delay)
    airflow.answer(dag_id, run_id, option)


@pytest.mark.parametrize("delay", [0, 5], ids=["at once", "after 5 s"])
def test_an_approval_answered_as_it_is_asked_resumes_the_task_and_the_refund_runs_once(airflow, server, out, delay):
    server.add(LOOKUP, REFUND, reply.text("Refunded 40 EUR."))
    first = len(server.requests)
    run_id = airflow.trigger(DAG_ID)

    answer_when_asked(airflow, DAG_ID, run_id, "Approve", delay)
    instance = airflow.wait_for_task(DAG_ID, run_id, TASK)

    assert (instance["state"], instance["try_number"]) == ("success", 1), airflow.last_log(instance)
    # Two requests before the stop, one after the refund: the two before it replayed.
    requests = server.requests[first:]
    assert [r.status for r in requests] == [200, 200, 200]
    assert tool_outputs(requests[2].body) == ["O-77: charged twice, 40 EUR each", "refunded 40 EUR on O-77"]
    assert tool_runs(out, run_id) == [("lookup_order", 1), ("issue_refund", 1)]
    log = airflow.task_log(DAG_ID, run_id, TASK, 1)
    assert log.count("Durable: waiting for a person to approve or reject") == 1
    assert "Durable: issue_refund approved by" in log
    assert xcom_return_value(DAG_ID, run_id, TASK) == "Refunded 40 EUR."
    assert journal_left(DAG_ID, run_id, out) == []


def test_an_approval_answered_once_the_task_waits_without_a_worker_resumes_it(airflow, server, out):
    server.add(LOOKUP, REFUND, reply.text("Refunded 40 EUR."))
    first = len(server.requests)
    run_id = airflow.trigger(DAG_ID)

    instance = airflow.wait_until_waiting(DAG_ID, run_id)
    assert instance["try_number"] == 1
    assert len(server.requests) - first == 2
    assert tool_runs(out, run_id) == [("lookup_order", 1)]
    shown = airflow.request_shown(DAG_ID, run_id)
    assert shown["subject"] == "Agent 'support' asks to run issue_refund"
    assert '"order_id": "O-77"' in shown["body"] and '"amount_eur": 40' in shown["body"]
    assert shown["options"] == ["Approve", "Reject"]

    airflow.answer(DAG_ID, run_id, "Approve")
    instance = airflow.wait_for_task(DAG_ID, run_id, TASK)

    assert (instance["state"], instance["try_number"]) == ("success", 1), airflow.last_log(instance)
    assert len(server.requests) - first == 3
    assert tool_runs(out, run_id) == [("lookup_order", 1), ("issue_refund", 1)]
    assert xcom_return_value(DAG_ID, run_id, TASK) == "Refunded 40 EUR."


def test_a_rejected_refund_never_runs_and_the_model_hears_the_rejection(airflow, server, out):
    server.add(LOOKUP, REFUND, reply.text("I could not refund it."))
    first = len(server.requests)
    run_id = airflow.trigger(DAG_ID)
    airflow.wait_until_waiting(DAG_ID, run_id)

    airflow.answer(DAG_ID, run_id, "Reject")
    instance = airflow.wait_for_task(DAG_ID, run_id, TASK)

    assert (instance["state"], instance["try_number"]) == ("success", 1), airflow.last_log(instance)
    requests = server.requests[first:]
    assert len(requests) == 3
    assert tool_outputs(requests[2].body) == ["O-77: charged twice, 40 EUR each", ToolDenied().message]
    assert tool_runs(out, run_id) == [("lookup_order", 1)]
    assert "Durable: issue_refund rejected by" in airflow.task_log(DAG_ID, run_id, TASK, 1)


def test_a_retry_after_a_failure_past_the_approval_replays_the_decision_and_asks_no_one(airflow, server, out):
    close = reply.tool_calls(("close_ticket", {"note": "refunded, fail once"}, "call_close"))
    server.add(LOOKUP, REFUND, close, reply.text("Refunded and closed."))
    first = len(server.requests)
    run_id = airflow.trigger(DAG_ID)
    airflow.wait_until_waiting(DAG_ID, run_id)
    airflow.answer(DAG_ID, run_id, "Approve")

    instance = airflow.wait_for_task(DAG_ID, run_id, TASK, try_number=2)

    assert (instance["state"], instance["try_number"]) == ("success", 2), airflow.last_log(instance)
    # Try 1: two requests before the stop, one after the refund (close_ticket then failed the
    # try); try 2 replays all three and asks only for the final answer.
    assert len(server.requests) - first == 4
    assert tool_runs(out, run_id) == [
        ("lookup_order", 1),
        ("issue_refund", 1),
        ("close_ticket", 1),
        ("close_ticket", 2),
    ]
    try_2 = airflow.task_log(DAG_ID, run_id, TASK, 2)
    assert "approval replayed" in try_2
    assert "waiting for a person" not in try_2
    assert "Durable: replayed 6 (approval 1, model 3, tool 2)" in try_2
    assert xcom_return_value(DAG_ID, run_id, TASK) == "Refunded and closed."


def test_a_refund_found_in_flight_is_put_to_a_person_whose_answer_resolves_it(airflow, server, out):
    from airflow.providers.common.ai.durable.core.in_flight import HAPPENED

    server.add(
        reply.tool_calls(("refund", {"order_id": "O-5", "amount_eur": 40}, "call_refund")),
        reply.text("Refunded the second payment."),
    )
    first = len(server.requests)
    run_id = airflow.trigger(ASK_DAG_ID)
    pid = airflow.wait_for_json(out / f"in_refund_{ASK_DAG_ID}_{run_id}.json", timeout=300)["pid"]
    os.kill(pid, signal.SIGKILL)

    airflow.wait_until_waiting(ASK_DAG_ID, run_id, timeout=300)
    shown = airflow.request_shown(ASK_DAG_ID, run_id)
    assert shown["subject"] == "Did refund take effect before its task was cut off?"
    assert '"order_id": "O-5"' in shown["body"]
    assert len(server.requests) - first == 1  # nothing reaches the model while the person decides
    airflow._request(
        "PATCH",
        airflow.hitl_path(ASK_DAG_ID, run_id),
        {"chosen_options": [HAPPENED], "params_input": {"output": "refund confirmed by the bank"}},
    )
    instance = airflow.wait_for_task(ASK_DAG_ID, run_id, TASK, try_number=2)

    assert (instance["state"], instance["try_number"]) == ("success", 2), airflow.last_log(instance)
    assert [tool for tool, _ in tool_runs(out, run_id)] == ["refund"]  # once, in try 1
    requests = server.requests[first:]
    assert len(requests) == 2
    assert tool_outputs(requests[1].body) == ["refund confirmed by the bank"]
    assert "calls found in flight: refund at 1.2 (ask): it happened" in airflow.task_log(ASK_DAG_ID, run_id, TASK, 2)
