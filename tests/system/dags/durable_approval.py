"""
Durable agents whose refunds need a person's approval, for tests/system/test_approvals_in_airflow.py. Each
tool notes each real run in DURABLE_TEST_OUT/approval_tool_calls.jsonl; ``close_ticket`` fails
on the task's first try when the ticket's text says so, to fail a try after an approval.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timedelta
from pathlib import Path

from agents import Agent, function_tool
from airflow.providers.common.compat.sdk import dag, get_current_context, task

from airflow.providers.common.ai.operators.agent import AgentOperator


def _note(tool: str, **arguments: object) -> None:
    ti = get_current_context()["ti"]
    with Path(os.environ["DURABLE_TEST_OUT"], "approval_tool_calls.jsonl").open("a") as calls:
        note = {"run_id": ti.run_id, "try": ti.try_number, "tool": tool, "at": time.time(), **arguments}
        calls.write(json.dumps(note) + "\n")


@function_tool
def lookup_order(order_id: str) -> str:
    """The order's payments."""
    _note("lookup_order", order_id=order_id)
    return f"{order_id}: charged twice, 40 EUR each"


@function_tool(needs_approval=True)
def issue_refund(order_id: str, amount_eur: int) -> str:
    """Refund a payment of an order."""
    _note("issue_refund", order_id=order_id, amount_eur=amount_eur)
    return f"refunded {amount_eur} EUR on {order_id}"


# Its failure fails the try (no failure_error_function turns it into text for the model).
@function_tool(failure_error_function=None)
def close_ticket(note: str) -> str:
    """Close the ticket with a note."""
    _note("close_ticket", note=note)
    if "fail once" in note and get_current_context()["ti"].try_number == 1:
        raise RuntimeError("the ticket system is down")
    return "closed"


def _support_agent() -> Agent:
    return Agent(name="support", model="gpt-4.1-mini", tools=[lookup_order, issue_refund, close_ticket])


def _handle_ticket(dag_id: str, **kwargs: object) -> None:
    # A DAG object in the module's globals, where the dag-processor finds it.
    @dag(dag_id=dag_id, schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
    def approval_dag():
        AgentOperator(
            task_id="handle_ticket",
            agent=_support_agent,
            prompt="Order O-77 was charged twice: refund the second payment, then close the ticket.",
            openai_conn_id="openai_default",
            durable=True,
            **kwargs,
        )

    globals()[dag_id] = approval_dag()


# The trigger resolves it no sooner than RESUME_DELAY (15 s) after the task deferred.
TIMEOUT = timedelta(seconds=15)

# Retries with no delay: the retry after a failed tool call follows at once.
_handle_ticket("durable_approval", retries=1, retry_delay=timedelta(seconds=0))
_handle_ticket("durable_approval_timeout", retries=0, response_timeout=TIMEOUT)
_handle_ticket("durable_approval_timeout_default", retries=0, response_timeout=TIMEOUT, defaults="Reject")


@dag(dag_id="durable_approval_decorated", schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def durable_approval_decorated():
    # The prompt is written on every execution, the resumed one too.
    @task.agent(agent=_support_agent, openai_conn_id="openai_default", durable=True, retries=1)
    def handle_ticket(order_id: str) -> str:
        return f"Order {order_id} was charged twice: refund the second payment, then close the ticket."

    handle_ticket("O-77")


durable_approval_decorated()
