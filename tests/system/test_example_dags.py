"""
The example DAGs, run as ``python example_dags/<file>.py`` with real Airflow retries against a local
OpenAI-compatible server: try 1 fails on the third model request, try 2 replays what try 1
completed and sends only that request again. The Pydantic AI example runs where the extra
[pydantic-ai] is installed (the Airflow 3.3 test venv) and is skipped elsewhere.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from dag_runs import (
    EXAMPLE_DAGS,
    durable_env,
    journal_entries,
    latest_run_id,
    run_dag_file,
    task_states,
    xcom_return_value,
    xcom_value,
)

from airflow.providers.common.ai.testing import FakeOpenAIServer, reply
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_0_PLUS


def usage_of_try_2(model: str, *, replayed: dict[str, int]) -> dict[str, Any]:
    """
    One live model request of 10 + 5 tokens on try 2; the two replayed requests had cost 30. In US
    dollars at the maintained table's price of gpt-4.1-mini ($0.40 and $1.60 per million tokens).
    """
    cost = (10 * 0.4 + 5 * 1.6) / 1_000_000
    return {
        "requests": 1,
        "input_tokens": 10,
        "output_tokens": 5,
        "total_tokens": 15,
        "cost_usd": cost,
        "models": {
            model: {"requests": 1, "input_tokens": 10, "output_tokens": 5, "total_tokens": 15, "cost_usd": cost}
        },
        "saved": {"requests": 2, "tokens": 30, "cost_usd": 0.0 + cost + cost},
        "unknown_prices": [],
        "replayed": replayed,
        "live": {"model": 1},
        "not_recorded": {},
        "in_flight": [],
    }


TRIAGE = {
    "category": "billing",
    "priority": "urgent",
    "summary": "Business customer C-1024 was charged twice for order O-77 and asks for a refund.",
}


def test_the_durable_agent_example_replays_try_1_and_sends_only_the_failed_request_again(tmp_path):
    script = [
        reply.tool_calls(("get_customer", {"email": "ada@example.com"}, "call_customer")),
        reply.tool_calls(("get_recent_orders", {"customer_id": "C-1024"}, "call_orders")),
        reply.text(json.dumps(TRIAGE)),
    ]
    with FakeOpenAIServer(script, fail_requests={3}) as server:
        run = run_dag_file(EXAMPLE_DAGS / "example_durable_agent.py", durable_env(server, tmp_path))
    assert run.returncode == 0, run.output[-5000:]
    run_id = latest_run_id("example_durable_agent")
    assert task_states("example_durable_agent", run_id) == {
        ("triage_ticket", -1): ("success", 2),
        ("report_usage", -1): ("success", 1),
    }

    # Model requests per try: 1-3 on try 1 (3 failed), only a new 3rd on try 2.
    assert [(r.number, r.status) for r in server.requests] == [(1, 200), (2, 200), (3, 500), (4, 200)]
    # The retried request carries the conversation that try 1 had: the replayed tool results.
    retried = json.dumps(server.requests[3].body["input"])
    assert '"call_customer"' in retried and "C-1024" in retried and "O-77" in retried
    assert server.requests[3].body == server.requests[2].body

    try_1, try_2 = run.tries("triage_ticket")
    assert (try_1.count("Tool get_customer ran"), try_1.count("Tool get_recent_orders ran")) == (1, 1)
    assert (try_2.count("Tool get_customer ran"), try_2.count("Tool get_recent_orders ran")) == (0, 0)
    assert "Durable: replayed 0, ran live 4 (model 2, tool 2), could not record 0" in try_1
    assert (
        "Durable: replayed 4 (model 2, tool 2), ran live 1 (model 1), could not record 0, "
        "saved 30 tokens by replaying, spent $0.000012, saved $0.000024" in try_2
    )
    assert "Agent 'triage' answered: 1 model request reached the model in this try" in try_2

    # The rendered prompt reached the model, and the pydantic output is the XCom, as JSON data.
    assert server.requests[0].body["input"][0]["content"] == (
        "Ticket from ada@example.com:\n\nI was charged twice for my last order. Please refund one of the payments."
    )
    assert xcom_return_value("example_durable_agent", run_id, "triage_ticket") == TRIAGE
    # The downstream task pulled try 2's usage XCom and logged it: one request paid, two saved.
    usage = usage_of_try_2("gpt-4.1-mini", replayed={"model": 2, "tool": 2})
    assert xcom_value("example_durable_agent", run_id, "triage_ticket", "usage") == usage
    assert xcom_return_value("example_durable_agent", run_id, "report_usage") == usage
    assert "triage_ticket: 1 model requests, 15 tokens; replaying saved 2 requests, 30 tokens" in run.output
    assert journal_entries("example_durable_agent", run_id, tmp_path) == []


def test_the_pydantic_ai_example_replays_try_1_and_sends_only_the_failed_request_again(tmp_path):
    pytest.importorskip(
        "pydantic_ai.models.openai", reason="Pydantic AI is the optional extra [pydantic-ai], not installed here"
    )
    script = [
        reply.tool_calls(("get_customer", {"email": "ada@example.com"}, "call_customer")),
        reply.tool_calls(("get_recent_orders", {"customer_id": "C-1024"}, "call_orders")),
        reply.tool_calls(("final_result", TRIAGE, "call_triage")),  # Pydantic AI's structured output
    ]
    with FakeOpenAIServer(script, fail_requests={3}) as server:
        run = run_dag_file(EXAMPLE_DAGS / "example_durable_pydantic_ai.py", durable_env(server, tmp_path))
    assert run.returncode == 0, run.output[-5000:]
    run_id = latest_run_id("example_durable_pydantic_ai")
    assert task_states("example_durable_pydantic_ai", run_id) == {
        ("triage_ticket", -1): ("success", 2),
        ("report_usage", -1): ("success", 1),
    }

    # Pydantic AI's OpenAIChatModel, through the connection: requests 1-3 on try 1 (3 failed), a new 3rd on try 2.
    assert [(r.path, r.number, r.status) for r in server.requests] == [
        ("/v1/chat/completions", 1, 200),
        ("/v1/chat/completions", 2, 200),
        ("/v1/chat/completions", 3, 500),
        ("/v1/chat/completions", 4, 200),
    ]
    assert server.requests[3].body == server.requests[2].body
    retried = json.dumps(server.requests[3].body["messages"])
    assert '"call_customer"' in retried and "C-1024" in retried and "O-77" in retried

    try_1, try_2 = run.tries("triage_ticket")
    assert (try_1.count("Tool get_customer ran"), try_1.count("Tool get_recent_orders ran")) == (1, 1)
    assert (try_2.count("Tool get_customer ran"), try_2.count("Tool get_recent_orders ran")) == (0, 0)
    assert "Durable: replayed 0, ran live 4 (model 2, tool 2), could not record 0" in try_1
    assert (
        "Durable: replayed 4 (model 2, tool 2), ran live 1 (model 1), could not record 0, "
        "saved 30 tokens by replaying, spent $0.000012, saved $0.000024" in try_2
    )
    assert "Agent 'triage' answered: 1 model request reached the model in this try" in try_2

    assert xcom_return_value("example_durable_pydantic_ai", run_id, "triage_ticket") == TRIAGE
    usage = usage_of_try_2("gpt-4.1-mini", replayed={"model": 2, "tool": 2})
    assert xcom_value("example_durable_pydantic_ai", run_id, "triage_ticket", "usage") == usage
    assert xcom_return_value("example_durable_pydantic_ai", run_id, "report_usage") == usage
    assert journal_entries("example_durable_pydantic_ai", run_id, tmp_path) == []


def test_the_durable_task_example_replays_both_agents_and_sends_the_reply_once(tmp_path):
    outbox = tmp_path / "outbox"
    script = [
        reply.text("Parcel marked delivered on Monday never arrived."),
        reply.tool_calls(("send_reply", {"ticket_id": "T-311", "text": "Sorry! We opened a trace."}, "call_send")),
        reply.text("Sent an apology and opened a trace."),
    ]
    with FakeOpenAIServer(script, fail_requests={3}) as server:
        run = run_dag_file(
            EXAMPLE_DAGS / "example_durable_task.py",
            {**durable_env(server, tmp_path), "EXAMPLE_OUTBOX": str(outbox)},
        )
    assert run.returncode == 0, run.output[-5000:]
    run_id = latest_run_id("example_durable_task")
    assert task_states("example_durable_task", run_id) == {("answer_ticket", -1): ("success", 2)}

    assert [(r.number, r.status) for r in server.requests] == [(1, 200), (2, 200), (3, 500), (4, 200)]
    try_1, try_2 = run.tries("answer_ticket")
    assert try_1.count("Tool send_reply sent the reply") == 1
    assert "Tool send_reply" not in try_2
    # The second agent failed on try 1; try 2 replays the first agent's answer as well.
    assert "Durable: replayed 0, ran live 3 (model 2, tool 1)" in try_1
    assert "Durable: replayed 3 (model 2, tool 1), ran live 1 (model 1), could not record 0" in try_2

    [sent] = outbox.iterdir()
    assert json.loads(sent.read_text())["text"] == "Sorry! We opened a trace."
    assert xcom_return_value("example_durable_task", run_id, "answer_ticket") == {
        "summary": "Parcel marked delivered on Monday never arrived.",
        "confirmation": "Sent an apology and opened a trace.",
    }
    assert xcom_value("example_durable_task", run_id, "answer_ticket", "usage") == usage_of_try_2(
        "gpt-4.1-mini", replayed={"model": 2, "tool": 1}
    )
    assert journal_entries("example_durable_task", run_id, tmp_path) == []


@pytest.mark.skipif(
    not AIRFLOW_V_3_0_PLUS,
    reason="Airflow 2.11's dag.test() ends the test run at a task's execution_timeout instead of failing the try "
    "(under a scheduler, test_in_flight_calls.py runs the example on 2.11 too)",
)
def test_the_payment_example_refunds_once_when_the_try_is_cut_off_in_the_refund(tmp_path):
    payments = tmp_path / "payments"
    script = [
        reply.tool_calls(("issue_refund", {"order_id": "O-1042", "amount_eur": 40}, "call_refund")),
        reply.text("I refunded the second charge."),
    ]
    with FakeOpenAIServer(script) as server:
        run = run_dag_file(
            EXAMPLE_DAGS / "example_durable_payment.py",
            {**durable_env(server, tmp_path), "EXAMPLE_PAYMENTS": str(payments)},
        )
    assert run.returncode == 0, run.output[-5000:]
    run_id = latest_run_id("example_durable_payment")
    assert task_states("example_durable_payment", run_id) == {("refund_customer", -1): ("success", 2)}

    # Try 1 asked for the refund and was cut off by execution_timeout in it; try 2 asked only for the answer.
    assert [r.number for r in server.requests] == [1, 2]
    [refund] = payments.glob("R-*.json")  # exactly once
    [final] = [r.body for r in server.requests[1:]]
    [output] = [item["output"] for item in final["input"] if item.get("type") == "function_call_output"]
    assert output == "Refund R-1 of 40 EUR for O-1042 was issued."
    try_1, try_2 = run.tries("refund_customer")
    assert "AirflowTaskTimeout" in try_1
    assert "calls found in flight: issue_refund at 1.2 (verify): it happened" in try_2
    [resolved] = xcom_value("example_durable_payment", run_id, "refund_customer", "usage")["in_flight"]
    assert (resolved["tool"], resolved["policy"], resolved["outcome"]) == ("issue_refund", "verify", "it happened")
    assert resolved["idempotency_key"] == json.loads(refund.read_text())["reference"]
    assert journal_entries("example_durable_payment", run_id, tmp_path) == []
