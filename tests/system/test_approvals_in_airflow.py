"""
Approvals of tool calls (R-39..R-41, R-54) under a real scheduler, api-server and triggerer: the
task stops at the refund, defers without a worker, a person answers through Airflow's public REST
API, and the task resumes, replaying what it did before the stop. Each test asserts the model
server's requests and each tool's real runs (``dags/durable_approval.py`` notes them). Answers at
chosen moments to a dozen tasks at once are in ``production/test_approval_timing.py``: SQLite
cannot take that load.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_2_PLUS

if not AIRFLOW_V_3_2_PLUS:
    pytest.skip("approvals need Airflow's human-in-the-loop (3.2+)", allow_module_level=True)
from agents.tool import DEFAULT_APPROVAL_REJECTION_MESSAGE
from airflow_services import AIRFLOW, AirflowServices, _in_own_group_ending_with_this_process, _is_running
from dag_runs import TEST_DAGS, durable_env, journal_entries, xcom_return_value, xcom_value

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply

#: The state of a task that waits for a person without holding a worker.
WAITING = "deferred"
TASK = "handle_ticket"

LOOKUP = reply.tool_calls(("lookup_order", {"order_id": "O-77"}, "call_lookup"))
REFUND = reply.tool_calls(("issue_refund", {"order_id": "O-77", "amount_eur": 40}, "call_refund"))


class ServicesWithTriggerer(AirflowServices):
    """The services, and the triggerer that a durable task waits on for a person's answer."""

    def __enter__(self) -> ServicesWithTriggerer:
        super().__enter__()
        self._processes["triggerer"] = subprocess.Popen(
            [AIRFLOW, "triggerer"],
            env=self.env,
            stdout=(self.logs / "triggerer.log").open("w"),
            stderr=subprocess.STDOUT,
            preexec_fn=_in_own_group_ending_with_this_process,
        )
        return self

    def hitl_path(self, dag_id: str, run_id: str, map_index: int = -1, task_id: str = TASK) -> str:
        return f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/{map_index}/hitlDetails"

    def wait_until_waiting(
        self, dag_id: str, run_id: str, *, times: int = 1, timeout: float = 180, task_id: str = TASK
    ) -> dict[str, Any]:
        """
        Wait until the task waits for a person for the ``times``-th time and the executor has
        reported the end of the workload that deferred it; returns the instance.

        These tests check what a resumed try does, in try 1. On Airflow 3.3 an answer resumes a
        deferred task at once, and the scheduler fails a try resumed before the executor reported
        the end of the workload that deferred it (the try after it then takes the answer: see
        the timing test, which answers at fixed moments instead).
        """
        deadline = time.monotonic() + timeout
        instance: dict[str, Any] = {}
        while time.monotonic() < deadline:
            self.ensure_running()
            try:
                instance = self.task_instance(dag_id, run_id, task_id)
            except OSError:
                instance = {}
            if instance.get("state") == WAITING and self._parked_workloads_ended(instance) >= times:
                return instance
            if instance.get("state") in ("success", "failed"):
                break
            time.sleep(0.5)
        raise TimeoutError(f"{dag_id} did not wait for a person: {instance}\n{self.service_log('scheduler')[-3000:]}")

    def _parked_workloads_ended(self, instance: dict[str, Any]) -> int:
        key = (
            f"TaskInstanceKey(dag_id='{instance['dag_id']}', task_id='{instance['task_id']}', "
            f"run_id='{instance['dag_run_id']}', "
            f"try_number={instance['try_number']}"
        )
        # Airflow 3.4 names the task instance by its id first: "... task instance <id> (coordinates=<key>)".
        event = r"Received executor event with state success for task instance (?:\S+ \(coordinates=)?"
        return len(re.findall(event + re.escape(key), self.service_log("scheduler")))

    def answer(self, dag_id: str, run_id: str, option: str) -> dict[str, Any]:
        """What a person's (or a bot's) PATCH of the request does; returns Airflow's answer."""
        return self._request("PATCH", self.hitl_path(dag_id, run_id), {"chosen_options": [option], "params_input": {}})

    def last_log(self, instance: dict[str, Any]) -> str:
        """The end of the log of the instance's latest try, for a failed assertion."""
        path = (instance["dag_id"], instance["dag_run_id"], TASK, instance["try_number"])
        return "\n".join(self.task_log(*path[:3], n)[-5000:] for n in range(1, path[3] + 1))

    def request_shown(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return self._request("GET", self.hitl_path(dag_id, run_id))

    def wait_for_mapped_task(
        self, dag_id: str, run_id: str, map_index: int, timeout: float = 900, task_id: str = TASK
    ) -> dict[str, Any]:
        """Wait until one mapped task instance finished for good (no retry left to come); returns it."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/{map_index}"
        deadline = time.monotonic() + timeout
        instance: dict[str, Any] = {}
        while time.monotonic() < deadline:
            self.ensure_running()
            try:
                instance = self._request("GET", path)
            except OSError:  # a busy api-server did not answer in time
                continue
            if instance["state"] in ("success", "failed") and not _is_running(instance.get("pid")):
                return instance
            time.sleep(1)
        raise TimeoutError(f"{dag_id}.{task_id}[{map_index}] of {run_id} did not finish in {timeout} s: {instance}")

    def mapped_task_logs(self, dag_id: str, run_id: str, map_index: int, tries: int, task_id: str = TASK) -> str:
        """The logs of tries 1 to ``tries`` of one mapped task instance, one after the other."""
        folder = Path(self.env["AIRFLOW_HOME"], "logs", f"dag_id={dag_id}", f"run_id={run_id}", f"task_id={task_id}")
        paths = [folder / f"map_index={map_index}" / f"attempt={n}.log" for n in range(1, tries + 1)]
        return "\n".join(path.read_text(errors="replace") for path in paths if path.exists())


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("approval_out")


@pytest.fixture(scope="module")
def server():
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def airflow(server, out, tmp_path_factory, airflow_db):
    env = {
        **durable_env(server, out),
        "DURABLE_TEST_OUT": str(out),
    }
    with ServicesWithTriggerer(TEST_DAGS, tmp_path_factory.mktemp("service_logs"), env) as services:
        yield services


def tool_runs(out: Path, run_id: str) -> list[tuple[str, int]]:
    """(tool, try) of each real tool run of the DAG run, in order."""
    path = out / "approval_tool_calls.jsonl"
    calls = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [(call["tool"], call["try"]) for call in calls if call["run_id"] == run_id]


def journal_left(dag_id: str, run_id: str, out: Path) -> list[str]:
    """The journal's entries left of a DAG run (the try summaries kept beside them left out)."""
    return [
        entry
        for entry in journal_entries(dag_id, run_id, out)
        if ".durable.summary/" not in entry and ".summaries/" not in entry
    ]


def tool_outputs(body: dict[str, Any]) -> list[str]:
    """The tool outputs a request carries (Responses input items, or Chat Completions tool messages)."""
    if "input" in body:
        return [item["output"] for item in body["input"] if item.get("type") == "function_call_output"]
    return [message["content"] for message in body["messages"] if message.get("role") == "tool"]


def test_an_approved_refund_runs_once_after_the_answer_and_nothing_before_it_is_asked_again(airflow, server, out):
    server.add(LOOKUP, REFUND, reply.text("Refunded 40 EUR."))
    first = len(server.requests)
    run_id = airflow.trigger("durable_approval")

    instance = airflow.wait_until_waiting("durable_approval", run_id)
    assert instance["try_number"] == 1
    assert len(server.requests) - first == 2
    assert tool_runs(out, run_id) == [("lookup_order", 1)]
    shown = airflow.request_shown("durable_approval", run_id)
    assert shown["subject"] == "Agent 'support' asks to run issue_refund"
    assert '"order_id": "O-77"' in shown["body"] and '"amount_eur": 40' in shown["body"]
    assert shown["options"] == ["Approve", "Reject"]

    airflow.answer("durable_approval", run_id, "Approve")
    instance = airflow.wait_for_task("durable_approval", run_id, TASK)

    assert (instance["state"], instance["try_number"]) == ("success", 1), airflow.last_log(instance)
    # One new request, after the refund: the two before the stop replayed.
    requests = server.requests[first:]
    assert [r.status for r in requests] == [200, 200, 200]
    assert tool_outputs(requests[2].body) == ["O-77: charged twice, 40 EUR each", "refunded 40 EUR on O-77"], requests[
        2
    ].body
    assert tool_runs(out, run_id) == [("lookup_order", 1), ("issue_refund", 1)]
    log = airflow.task_log("durable_approval", run_id, TASK, 1)
    assert "Durable: issue_refund approved by" in log
    assert xcom_return_value("durable_approval", run_id, TASK) == "Refunded 40 EUR."
    assert journal_left("durable_approval", run_id, out) == []


def test_a_rejected_refund_never_runs_and_the_model_hears_the_rejection(airflow, server, out):
    server.add(LOOKUP, REFUND, reply.text("I could not refund it."))
    first = len(server.requests)
    run_id = airflow.trigger("durable_approval")
    airflow.wait_until_waiting("durable_approval", run_id)

    airflow.answer("durable_approval", run_id, "Reject")
    instance = airflow.wait_for_task("durable_approval", run_id, TASK)

    assert (instance["state"], instance["try_number"]) == ("success", 1), airflow.last_log(instance)
    requests = server.requests[first:]
    assert len(requests) == 3
    assert tool_outputs(requests[2].body)[-1] == DEFAULT_APPROVAL_REJECTION_MESSAGE
    assert tool_runs(out, run_id) == [("lookup_order", 1)]
    assert "Durable: issue_refund rejected by" in airflow.task_log("durable_approval", run_id, TASK, 1)


def test_two_approvals_in_one_run_are_asked_in_turn_and_each_refund_runs_once(airflow, server, out):
    second_refund = reply.tool_calls(("issue_refund", {"order_id": "O-78", "amount_eur": 15}, "call_refund_2"))
    server.add(LOOKUP, REFUND, second_refund, reply.text("Refunded both."))
    first = len(server.requests)
    run_id = airflow.trigger("durable_approval")

    airflow.wait_until_waiting("durable_approval", run_id)
    airflow.answer("durable_approval", run_id, "Approve")
    # The resumed try replays, runs the first refund, asks the model, and stops for the second.
    instance = airflow.wait_until_waiting("durable_approval", run_id, times=2)
    assert instance["try_number"] == 1
    assert len(server.requests) - first == 3
    assert tool_runs(out, run_id) == [("lookup_order", 1), ("issue_refund", 1)]
    # Airflow shows the first request's text again; the XCom and the log show the current one.
    assert airflow.request_shown("durable_approval", run_id)["response_received"] is False
    current = xcom_value("durable_approval", run_id, TASK, "approval_request")
    assert '"order_id": "O-78"' in current["body"] and "O-77" not in current["body"]
    assert "Airflow shows this task instance's first approval request" in airflow.task_log(
        "durable_approval", run_id, TASK, 1
    )

    airflow.answer("durable_approval", run_id, "Approve")
    instance = airflow.wait_for_task("durable_approval", run_id, TASK)

    assert (instance["state"], instance["try_number"]) == ("success", 1), airflow.last_log(instance)
    assert len(server.requests) - first == 4
    assert tool_runs(out, run_id) == [("lookup_order", 1), ("issue_refund", 1), ("issue_refund", 1)]
    assert xcom_return_value("durable_approval", run_id, TASK) == "Refunded both."


def test_a_retry_after_a_failure_past_the_approval_replays_the_decision_and_asks_no_one(airflow, server, out):
    close = reply.tool_calls(("close_ticket", {"note": "refunded, fail once"}, "call_close"))
    server.add(LOOKUP, REFUND, close, reply.text("Refunded and closed."))
    first = len(server.requests)
    run_id = airflow.trigger("durable_approval")
    airflow.wait_until_waiting("durable_approval", run_id)
    airflow.answer("durable_approval", run_id, "Approve")

    instance = airflow.wait_for_task("durable_approval", run_id, TASK, try_number=2)

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
    try_2 = airflow.task_log("durable_approval", run_id, TASK, 2)
    assert "approval replayed" in try_2
    assert "waiting for a person" not in try_2
    assert "Durable: replayed 6 (approval 1, model 3, tool 2)" in try_2
    assert xcom_return_value("durable_approval", run_id, TASK) == "Refunded and closed."


def test_a_timeout_without_a_default_fails_the_task_and_keeps_its_journal(airflow, server, out):
    server.add(LOOKUP, REFUND)
    first = len(server.requests)
    run_id = airflow.trigger("durable_approval_timeout")
    airflow.wait_until_waiting("durable_approval_timeout", run_id)

    instance = airflow.wait_for_task("durable_approval_timeout", run_id, TASK)

    assert (instance["state"], instance["try_number"]) == ("failed", 1), airflow.last_log(instance)
    assert len(server.requests) - first == 2
    assert tool_runs(out, run_id) == [("lookup_order", 1)]
    assert "nobody answered the approval request before its response_timeout" in airflow.task_log(
        "durable_approval_timeout", run_id, TASK, 1
    )
    assert journal_left("durable_approval_timeout", run_id, out) != []


def test_a_timeout_takes_the_default_and_the_run_goes_on_with_it(airflow, server, out):
    server.add(LOOKUP, REFUND, reply.text("Not refunded."))
    first = len(server.requests)
    run_id = airflow.trigger("durable_approval_timeout_default")
    airflow.wait_until_waiting("durable_approval_timeout_default", run_id)

    instance = airflow.wait_for_task("durable_approval_timeout_default", run_id, TASK)

    assert (instance["state"], instance["try_number"]) == ("success", 1), airflow.last_log(instance)
    requests = server.requests[first:]
    assert len(requests) == 3
    assert tool_outputs(requests[2].body)[-1] == DEFAULT_APPROVAL_REJECTION_MESSAGE
    assert tool_runs(out, run_id) == [("lookup_order", 1)]
    log = airflow.task_log("durable_approval_timeout_default", run_id, TASK, 1)
    assert "Durable: issue_refund rejected by the default after the response timeout" in log


def test_a_task_agent_waits_and_resumes_with_its_prompt_written_again(airflow, server, out):
    server.add(LOOKUP, REFUND, reply.text("Refunded 40 EUR."))
    first = len(server.requests)
    run_id = airflow.trigger("durable_approval_decorated")
    airflow.wait_until_waiting("durable_approval_decorated", run_id)

    airflow.answer("durable_approval_decorated", run_id, "Approve")
    instance = airflow.wait_for_task("durable_approval_decorated", run_id, TASK)

    assert (instance["state"], instance["try_number"]) == ("success", 1), airflow.last_log(instance)
    requests = server.requests[first:]
    assert len(requests) == 3
    assert "Order O-77 was charged twice" in json.dumps(requests[2].body)
    assert tool_runs(out, run_id) == [("lookup_order", 1), ("issue_refund", 1)]
    assert xcom_return_value("durable_approval_decorated", run_id, TASK) == "Refunded 40 EUR."
