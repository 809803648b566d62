"""
Durable tasks under a real scheduler with LocalExecutor, where each try runs in a worker process
of its own: a worker killed with SIGKILL in the middle of a tool call, tasks cleared by hand
after they failed for good or succeeded, and a Pydantic AI agent's tasks retried.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from airflow_services import AirflowServices
from dag_runs import TEST_DAGS, durable_env, journal_entries, xcom_return_value

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_4_PLUS


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("durable_out")


@pytest.fixture(scope="module")
def server():
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def airflow(server, out, tmp_path_factory, airflow_db):
    env = {**durable_env(server, out), "DURABLE_TEST_OUT": str(out), "FAKE_OPENAI_BASE_URL": server.base_url}
    with AirflowServices(TEST_DAGS, tmp_path_factory.mktemp("service_logs"), env) as services:
        yield services


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_worker_killed_in_a_tool_call_reruns_only_that_call_once_with_the_same_idempotency_key(airflow, server, out):
    server.add(
        reply.tool_calls(("lookup_ticket", {"ticket_id": "T-9"}, "call_lookup")),
        reply.tool_calls(("send_reply", {"ticket_id": "T-9", "text": "We are on it."}, "call_send")),
        reply.text("Replied to T-9."),
    )
    first_request = len(server.requests)
    run_id = airflow.trigger("durable_tool_killed")

    # Try 1 is inside send_reply, which has already written the message: kill its worker process.
    pid = airflow.wait_for_json(out / "in_send_reply.json")["pid"]
    requests_of_try_1 = server.requests[first_request:]
    os.kill(pid, signal.SIGKILL)

    instance = airflow.wait_for_task("durable_tool_killed", run_id, "answer_ticket", try_number=2)
    assert (instance["state"], instance["try_number"]) == ("success", 2), airflow.service_log("scheduler")[-4000:]

    # Model requests: two on try 1; try 2 replays both and asks only for the final answer.
    assert [r.status for r in requests_of_try_1] == [200, 200]
    assert [r.status for r in server.requests[first_request:]] == [200, 200, 200]

    # Tools: lookup_ticket ran once; send_reply, killed on try 1, ran once more with the same key
    # and found its message already sent.
    [lookup, send_1, send_2] = lines(out / "tool_calls.jsonl")
    assert (lookup["tool"], lookup["try"]) == ("lookup_ticket", 1)
    assert (send_1["tool"], send_1["try"], send_1["already_sent"]) == ("send_reply", 1, False)
    assert (send_2["tool"], send_2["try"], send_2["already_sent"]) == ("send_reply", 2, True)
    assert send_1["key"] == send_2["key"]
    assert len(list((out / "outbox").iterdir())) == 1

    try_2 = airflow.task_log("durable_tool_killed", run_id, "answer_ticket", 2)
    assert "a call an earlier try started and never finished runs again" in try_2
    assert send_1["key"] in try_2
    assert "Durable: replayed 3 (model 2, tool 1), ran live 2 (model 1, tool 1), could not record 0" in try_2
    assert xcom_return_value("durable_tool_killed", run_id, "answer_ticket") == "Replied to T-9."
    assert journal_entries("durable_tool_killed", run_id, out) == []


def test_clearing_a_task_that_failed_for_good_replays_its_journal(airflow, server, out):
    server.add(
        reply.tool_calls(("lookup_ticket", {"ticket_id": "T-5"}, "call_lookup")),
        reply.text("Billing, urgent."),
    )
    server.fail_later(2)  # an outage that lasts longer than the task's retries
    first_request = len(server.requests)
    run_id = airflow.trigger("durable_cleared")

    instance = airflow.wait_for_task("durable_cleared", run_id, "triage")
    assert (instance["state"], instance["try_number"]) == ("failed", 1)
    assert journal_entries("durable_cleared", run_id, out) != []  # kept for a clear
    assert "Durable: durable=True with retries=0" in airflow.task_log("durable_cleared", run_id, "triage", 1)

    airflow.clear("durable_cleared", run_id, "triage")
    instance = airflow.wait_for_task("durable_cleared", run_id, "triage", try_number=2)
    assert (instance["state"], instance["try_number"]) == ("success", 2)

    assert [r.status for r in server.requests[first_request:]] == [200, 500, 200]
    assert [call["try"] for call in lines(out / "cleared_tool_calls.jsonl") if call["run_id"] == run_id] == [1]
    try_2 = airflow.task_log("durable_cleared", run_id, "triage", 2)
    assert "Durable: replayed 2 (model 1, tool 1), ran live 1 (model 1), could not record 0" in try_2
    assert xcom_return_value("durable_cleared", run_id, "triage") == "Billing, urgent."
    assert journal_entries("durable_cleared", run_id, out) == []


@pytest.mark.skipif(not AIRFLOW_V_3_4_PLUS, reason="Airflow before 3.4 keeps the task state store on a clear")
def test_on_airflow_3_4_a_clear_that_discards_the_task_state_starts_the_task_over(airflow, server, out):
    """
    Airflow 3.4's clear discards the task state store, and the journal with it, unless "keep task
    state" is asked for: the next try runs every call live, as a clear of a succeeded task does.
    """
    server.add(
        reply.tool_calls(("lookup_ticket", {"ticket_id": "T-5"}, "call_lookup")),
        reply.tool_calls(("lookup_ticket", {"ticket_id": "T-5"}, "call_lookup")),
        reply.text("Billing, normal."),
    )
    server.fail_later(2)  # the failed request takes no answer: try 2 gets the second and third
    first_request = len(server.requests)
    run_id = airflow.trigger("durable_cleared")
    instance = airflow.wait_for_task("durable_cleared", run_id, "triage")
    assert (instance["state"], instance["try_number"]) == ("failed", 1)
    assert journal_entries("durable_cleared", run_id, out) != []

    airflow.clear("durable_cleared", run_id, "triage", keep_task_state=False)
    assert journal_entries("durable_cleared", run_id, out) == []  # discarded by the clear itself
    instance = airflow.wait_for_task("durable_cleared", run_id, "triage", try_number=2)
    assert (instance["state"], instance["try_number"]) == ("success", 2)

    # Try 2 asked the model again from the start (the first request of try 1, again) and ran the
    # tool again: nothing replayed.
    requests = server.requests[first_request:]
    assert [r.status for r in requests] == [200, 500, 200, 200]
    assert requests[2].body["input"] == requests[0].body["input"]
    assert [call["try"] for call in lines(out / "cleared_tool_calls.jsonl") if call["run_id"] == run_id] == [1, 2]
    try_2 = airflow.task_log("durable_cleared", run_id, "triage", 2)
    assert "Durable: replayed 0, ran live 3 (model 2, tool 1), could not record 0" in try_2
    assert xcom_return_value("durable_cleared", run_id, "triage") == "Billing, normal."
    assert journal_entries("durable_cleared", run_id, out) == []


def test_clearing_a_task_that_succeeded_starts_over(airflow, server, out):
    server.add(
        reply.tool_calls(("lookup_ticket", {"ticket_id": "T-5"}, "call_lookup")),
        reply.text("Billing, urgent."),
        reply.tool_calls(("lookup_ticket", {"ticket_id": "T-5"}, "call_lookup")),
        reply.text("Billing, normal."),
    )
    first_request = len(server.requests)
    run_id = airflow.trigger("durable_cleared")
    assert airflow.wait_for_task("durable_cleared", run_id, "triage")["state"] == "success"

    airflow.clear("durable_cleared", run_id, "triage")
    instance = airflow.wait_for_task("durable_cleared", run_id, "triage", try_number=2)
    assert (instance["state"], instance["try_number"]) == ("success", 2)

    assert [r.status for r in server.requests[first_request:]] == [200, 200, 200, 200]
    assert [call["try"] for call in lines(out / "cleared_tool_calls.jsonl") if call["run_id"] == run_id] == [
        1,
        2,
    ]
    try_2 = airflow.task_log("durable_cleared", run_id, "triage", 2)
    assert "Durable: replayed 0, ran live 3 (model 2, tool 1), could not record 0" in try_2
    assert xcom_return_value("durable_cleared", run_id, "triage") == "Billing, normal."


def _has_pydantic_ai() -> bool:
    try:
        import pydantic_ai.models.openai  # noqa: F401
    except ImportError:
        return False
    return True


# A mark, not a skip in the test: a skipped test starts no services.
@pytest.mark.skipif(
    not _has_pydantic_ai(), reason="Pydantic AI is the optional extra [pydantic-ai], not installed here"
)
def test_a_pydantic_ai_agent_retried_by_the_scheduler_replays_try_1_in_a_new_worker(airflow, server, out):
    server.add(
        reply.tool_calls(("weather", {"city": "Paris"}, "call_1")),
        reply.text("Sunny in Paris."),
        reply.tool_calls(("weather", {"city": "Rome"}, "call_2")),
        reply.text("Sunny in Rome."),
    )
    server.fail_later(2, 5)  # the second request of each task's first try
    first_request = len(server.requests)
    dag_id = "durable_pydantic_ai_operator"
    run_id = airflow.trigger(dag_id)

    for task_id, city in (("forecast", "Paris"), ("forecast_decorated", "Rome")):
        instance = airflow.wait_for_task(dag_id, run_id, task_id, try_number=2)
        assert (instance["state"], instance["try_number"]) == ("success", 2), airflow.service_log("scheduler")[-4000:]
        try_2 = airflow.task_log(dag_id, run_id, task_id, 2)
        assert "Durable: replayed 2 (model 1, tool 1), ran live 1 (model 1), could not record 0" in try_2
        assert xcom_return_value(dag_id, run_id, task_id) == f"Sunny in {city}."

    requests = server.requests[first_request:]
    assert [r.status for r in requests] == [200, 500, 200, 200, 500, 200]
    assert requests[2].body == requests[1].body and requests[5].body == requests[4].body
    runs = (out / "tool_runs.txt").read_text().splitlines()
    assert [line.rsplit(" ", 1)[0] for line in runs] == ["weather Paris", "weather Rome"]
    assert journal_entries(dag_id, run_id, out) == []
