"""
A tool call in flight when a try died (R-56, R-57), under a real scheduler, api-server and
triggerer (LocalExecutor, each try a worker process of its own): try 1 of each DAG of
``dags/durable_in_flight.py`` refunds an order and is cut off in the refund tool (its worker
SIGKILLed, the task's ``execution_timeout``, or SIGTERM from Airflow when a person clears the
running task); try 2 resolves the call by the tool's policy. ``dags/durable_pydantic_ai_in_flight.py``
is the same refund with a Pydantic AI agent, through Pydantic AI's real ``OpenAIChatModel``. Each test asserts how many refunds the
payment service made, which requests reached the model server in each try, and what the usage XCom
and the journal page's try summaries say.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import signal
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from airflow_services import API, AirflowServices, clear_body
from dag_runs import EXAMPLE_DAGS, TEST_DAGS, durable_env, journal_entries, xcom_value

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_0_PLUS, AIRFLOW_V_3_2_PLUS

TASK = "refund_order"
WITH_PYDANTIC_AI = pytest.mark.skipif(
    importlib.util.find_spec("pydantic_ai") is None,
    reason="Pydantic AI is the optional extra [pydantic-ai], not installed here",
)
REFUND = reply.tool_calls(("refund", {"order_id": "O-5", "amount_eur": 40}, "call_refund"))


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("in_flight_out")


@pytest.fixture(scope="module")
def server():
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def dags(tmp_path_factory) -> Path:
    """The DAGs of these tests, and the payment example, run under the scheduler as its users run it."""
    folder = tmp_path_factory.mktemp("in_flight_dags")
    for dag_file in (
        TEST_DAGS / "durable_in_flight.py",
        TEST_DAGS / "durable_pydantic_ai_in_flight.py",
        EXAMPLE_DAGS / "example_durable_payment.py",
    ):
        (folder / dag_file.name).symlink_to(dag_file)
    return folder


@pytest.fixture(scope="module")
def airflow(server, out, dags, tmp_path_factory, airflow_db):
    env = {
        **durable_env(server, out),
        "DURABLE_TEST_OUT": str(out),
        "EXAMPLE_PAYMENTS": str(out / "example_payments"),
        # A cleared running task is sent SIGTERM, then SIGKILL this many seconds later.
        "AIRFLOW__CORE__KILLED_TASK_CLEANUP_TIME": "5",
        # One key for every process, set before any starts: the workers encrypt what the page decrypts.
        "AIRFLOW__CORE__FERNET_KEY": base64.urlsafe_b64encode(b"the in-flight calls tests' key..").decode(),
    }
    if AIRFLOW_V_3_2_PLUS:
        from test_approvals_in_airflow import ServicesWithTriggerer

        services: AirflowServices = ServicesWithTriggerer(dags, tmp_path_factory.mktemp("service_logs"), env)
    else:
        services = AirflowServices(dags, tmp_path_factory.mktemp("service_logs"), env)
    with services:
        yield services


def refunds(out: Path, run_id: str) -> list[dict[str, Any]]:
    """The refunds the payment service made in the DAG run ``run_id``, in order."""
    path = out / "payments.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [payment for payment in map(json.loads, lines) if payment["run_id"] == run_id]


def tool_outputs(body: dict[str, Any]) -> list[str]:
    if "input" in body:
        return [item["output"] for item in body["input"] if item.get("type") == "function_call_output"]
    return [message["content"] for message in body["messages"] if message.get("role") == "tool"]


class Run:
    """One DAG run whose try 1 is cut off in the refund: the requests each try sent the model server."""

    def __init__(
        self, airflow: AirflowServices, server: FakeOpenAIServer, out: Path, dag_id: str, *, answered: bool = True
    ) -> None:
        self.airflow, self.server, self.out, self.dag_id = airflow, server, out, dag_id
        # The model's answers: the refund, and (unless the task never asks again) the final text.
        server.add(REFUND, *([reply.text("Refunded the second payment.")] if answered else []))
        self.start = len(server.requests)
        self.run_id = airflow.trigger(dag_id)
        # 2.11's SequentialExecutor on a busy machine: minutes
        self.pid = airflow.wait_for_json(out / f"in_refund_{dag_id}_{self.run_id}.json", timeout=480)["pid"]
        self.try_1 = len(server.requests) - self.start

    def requests_after_try_1(self) -> list[dict[str, Any]]:
        return [request.body for request in self.server.requests[self.start + self.try_1 :]]

    def finished(self, try_number: int = 2) -> dict[str, Any]:
        return self.airflow.wait_for_task(self.dag_id, self.run_id, TASK, try_number=try_number)

    def page(self) -> dict[str, Any]:
        """What the journal page's API shows of the task instance: its journal now and its tries."""
        query = urllib.parse.urlencode({"run_id": self.run_id, "task_id": TASK})
        return self.airflow._request("GET", f"/common-ai/api/journal/{self.dag_id}?{query}")

    def in_flight_of_try(self, try_number: int) -> list[dict[str, Any]]:
        page = self.page()
        [summary] = [s for s in page["tries"] if s["try_number"] == try_number]
        assert "usage" in summary, page
        return summary["usage"]["in_flight"]

    def log(self, try_number: int) -> str:
        return self.airflow.task_log(self.dag_id, self.run_id, TASK, try_number)


def test_rerun_runs_the_cut_off_refund_again_with_the_same_key(airflow, server, out):
    run = Run(airflow, server, out, "in_flight_rerun")
    os.kill(run.pid, signal.SIGKILL)
    instance = run.finished()
    assert (instance["state"], instance["try_number"]) == ("success", 2), run.log(2)[-3000:]

    made = refunds(out, run.run_id)
    assert [payment["try"] for payment in made] == [1, 2]  # at least once: the service refunded twice
    assert made[0]["key"] == made[1]["key"]
    assert run.try_1 == 1
    [final] = run.requests_after_try_1()
    assert tool_outputs(final) == [f"refunded 40 EUR on O-5 as P-{run.dag_id}-2"]
    [resolved] = xcom_value(run.dag_id, run.run_id, TASK, "usage")["in_flight"]
    assert (resolved["tool"], resolved["policy"], resolved["idempotency_key"]) == ("refund", "rerun", made[0]["key"])


@pytest.mark.parametrize(
    ("dag_id", "cut_off"),
    [
        pytest.param("in_flight_verify", "SIGKILL", id="worker SIGKILLed"),
        pytest.param("in_flight_verify_timeout", "execution_timeout", id="execution_timeout"),
        pytest.param(
            "in_flight_verify_sigterm",
            "SIGTERM",
            id="SIGTERM from a clear of the running task",
            marks=pytest.mark.skipif(
                not AIRFLOW_V_3_0_PLUS,
                reason="Airflow 2.11 under the SequentialExecutor lets a cleared running task run on to its end",
            ),
        ),
        pytest.param(
            "in_flight_verify_pydantic_ai",
            "SIGKILL",
            id="a Pydantic AI agent's worker SIGKILLed",
            marks=WITH_PYDANTIC_AI,
        ),
        pytest.param(
            "in_flight_verify_pydantic_ai_timeout",
            "execution_timeout",
            id="a Pydantic AI agent's execution_timeout",
            marks=WITH_PYDANTIC_AI,
        ),
        pytest.param(
            "in_flight_verify_pydantic_ai_sigterm",
            "SIGTERM",
            id="a Pydantic AI agent's SIGTERM from a clear of the running task",
            marks=[
                WITH_PYDANTIC_AI,
                pytest.mark.skipif(
                    not AIRFLOW_V_3_0_PLUS,
                    reason="Airflow 2.11 under the SequentialExecutor lets a cleared running task run on to its end",
                ),
            ],
        ),
    ],
)
def test_verify_finds_the_refund_made_and_the_model_gets_its_output_without_a_second_refund(
    airflow, server, out, dag_id, cut_off
):
    run = Run(airflow, server, out, dag_id)
    if cut_off == "SIGKILL":
        os.kill(run.pid, signal.SIGKILL)
    elif cut_off == "SIGTERM":
        airflow._request(
            "POST",
            f"{API}/dags/{dag_id}/clearTaskInstances",
            clear_body(run.run_id, TASK),
        )
    instance = run.finished()
    assert (instance["state"], instance["try_number"]) == ("success", 2), run.log(2)[-3000:]

    made = refunds(out, run.run_id)
    assert [payment["try"] for payment in made] == [1]  # exactly once
    # Try 1 sent the request whose answer asked for the refund; try 2 replayed it and sent only the next.
    assert run.try_1 == 1
    [final] = run.requests_after_try_1()
    assert tool_outputs(final) == [f"refund P-{dag_id}-1 was already made"]
    resolved = {"step": "1.2", "tool": "refund", "idempotency_key": made[0]["key"], "policy": "verify"}
    assert xcom_value(dag_id, run.run_id, TASK, "usage")["in_flight"] == [{**resolved, "outcome": "it happened"}]
    if AIRFLOW_V_3_0_PLUS:  # 2.11's page is a view of the Flask UI behind its login (test_journal_page.py)
        assert run.in_flight_of_try(2) == [{**resolved, "outcome": "it happened"}]
    log = run.log(2)
    assert "calls found in flight: refund at 1.2 (verify): it happened" in log
    assert "tool 'refund' at 1.2 was in flight when a try died; verify: it happened" in log
    assert "tool 'refund' at 1.2 ran live" not in log  # it did not run: the log must not say it did


@WITH_PYDANTIC_AI
def test_a_pydantic_ai_refund_that_lands_after_execution_timeout_is_waited_for_and_the_retry_finds_it_made(
    airflow, server, out
):
    # Try 1's tool waits 45 s before it refunds; execution_timeout stops the try at 30 s, which
    # ends once the call has: the refund lands in try 1, never behind try 2's verify.
    run = Run(airflow, server, out, "in_flight_verify_pydantic_ai_late")
    instance = run.finished()
    assert (instance["state"], instance["try_number"]) == ("success", 2), run.log(2)[-3000:]
    assert "the try was stopped while tool 'refund' at 1.2 ran in a thread" in run.log(1)

    made = refunds(out, run.run_id)
    assert [payment["try"] for payment in made] == [1]  # exactly once, by try 1 after its timeout
    assert run.try_1 == 1
    [final] = run.requests_after_try_1()
    assert tool_outputs(final) == [f"refund P-{run.dag_id}-1 was already made"]
    resolved = {"step": "1.2", "tool": "refund", "idempotency_key": made[0]["key"], "policy": "verify"}
    assert xcom_value(run.dag_id, run.run_id, TASK, "usage")["in_flight"] == [{**resolved, "outcome": "it happened"}]
    assert "tool 'refund' at 1.2 ran live" not in run.log(2)


def test_fail_fails_the_task_for_good_and_keeps_the_journal_showing_the_call_in_flight(airflow, server, out):
    run = Run(airflow, server, out, "in_flight_fail", answered=False)
    os.kill(run.pid, signal.SIGKILL)
    instance = run.finished()
    # retries=3: only a failure for good stops at try 2.
    assert (instance["state"], instance["try_number"]) == ("failed", 2), run.log(2)[-3000:]
    time.sleep(5)
    assert airflow.task_instance(run.dag_id, run.run_id, TASK)["try_number"] == 2

    made = refunds(out, run.run_id)
    assert len(made) == 1 and run.requests_after_try_1() == []
    log = run.log(2).replace('\\"', '"')  # on Airflow 3 JSON lines, the message a JSON string in them
    assert "tool 'refund' was in flight at 1.2" in log and made[0]["key"] in log
    assert '{"order_id": "O-5", "amount_eur": 40}' in log
    assert journal_entries(run.dag_id, run.run_id, out) != []
    if AIRFLOW_V_3_0_PLUS:
        [step] = [s for r in run.page()["journal"] for s in r["steps"] if s["key"] == "1.2"]
        assert step["state"] == "in flight"
        assert [c["outcome"] for c in run.in_flight_of_try(2)] == ["the task failed for good"]


@pytest.mark.skipif(not AIRFLOW_V_3_2_PLUS, reason="'ask' needs Airflow's human-in-the-loop (3.2+)")
@pytest.mark.parametrize("answered", ["at once", "after a plain wait"])
def test_ask_puts_the_call_to_a_person_through_the_rest_api_and_their_answer_resolves_it(
    airflow, server, out, answered
):
    from airflow.providers.common.ai.durable.core.in_flight import HAPPENED

    dag_id = "in_flight_ask"
    run = Run(airflow, server, out, dag_id)
    os.kill(run.pid, signal.SIGKILL)
    airflow.wait_until_waiting(dag_id, run.run_id, task_id=TASK, timeout=300)
    shown = airflow._request("GET", airflow.hitl_path(dag_id, run.run_id, task_id=TASK))
    made = refunds(out, run.run_id)
    assert shown["subject"] == "Did refund take effect before its task was cut off?"
    assert made[0]["key"] in shown["body"] and '"order_id": "O-5"' in shown["body"]
    assert run.requests_after_try_1() == []  # nothing reaches the model while the person decides
    if answered == "after a plain wait":
        time.sleep(20)
    airflow._request(
        "PATCH",
        airflow.hitl_path(dag_id, run.run_id, task_id=TASK),
        {"chosen_options": [HAPPENED], "params_input": {"output": "refund confirmed by the bank"}},
    )
    instance = run.finished()
    assert instance["state"] == "success", run.log(instance["try_number"])[-3000:]

    assert len(refunds(out, run.run_id)) == 1
    [final] = run.requests_after_try_1()
    assert tool_outputs(final) == ["refund confirmed by the bank"]
    [resolved] = xcom_value(dag_id, run.run_id, TASK, "usage")["in_flight"]
    assert resolved["policy"] == "ask" and resolved["outcome"].startswith("it happened (asked: ")
    assert "calls found in flight: refund at 1.2 (ask): it happened" in run.log(instance["try_number"])


def test_the_payment_example_refunds_once_when_its_worker_is_killed_in_the_refund(airflow, server, out):
    dag_id, task_id = "example_durable_payment", "refund_customer"
    server.add(
        reply.tool_calls(("issue_refund", {"order_id": "O-1042", "amount_eur": 40}, "call_refund")),
        reply.text("I refunded the second charge."),
    )
    start = len(server.requests)
    run_id = airflow.trigger(dag_id)
    payments = out / "example_payments"
    os.kill(airflow.wait_for_json(payments / "answer_lost_*.json", timeout=240)["pid"], signal.SIGKILL)

    instance = airflow.wait_for_task(dag_id, run_id, task_id, try_number=2)
    assert (instance["state"], instance["try_number"]) == ("success", 2)
    [refund] = payments.glob("R-*.json")  # exactly once
    assert [len(tool_outputs(r.body)) for r in server.requests[start:]] == [0, 1]
    assert tool_outputs(server.requests[-1].body) == ["Refund R-1 of 40 EUR for O-1042 was issued."]
    [resolved] = xcom_value(dag_id, run_id, task_id, "usage")["in_flight"]
    assert (resolved["policy"], resolved["outcome"]) == ("verify", "it happened")
    assert resolved["idempotency_key"] == json.loads(refund.read_text())["reference"]
