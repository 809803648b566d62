"""
Approvals answered at chosen moments, for tests/system/test_approvals_in_airflow.py (R-54): one
mapped task instance per answer, each with a model server of its own (connection
``openai_timing_<map index>``), so that the test tells whose requests are whose. Each tool notes
each real run in DURABLE_TEST_OUT/approval_tool_calls.jsonl, with its map index and try.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from pathlib import Path

from agents import Agent, function_tool
from airflow.providers.common.compat.sdk import dag, get_current_context

from airflow.providers.common.ai.operators.agent import AgentOperator

#: How many task instances the test answers, each at its own moment.
INSTANCES = 12


def _note(tool: str) -> None:
    ti = get_current_context()["ti"]
    note = {"run_id": ti.run_id, "map_index": ti.map_index, "try": ti.try_number, "tool": tool}
    with Path(os.environ["DURABLE_TEST_OUT"], "approval_tool_calls.jsonl").open("a") as calls:
        calls.write(json.dumps(note) + "\n")


@function_tool
def lookup_order(order_id: str) -> str:
    """The order's payments."""
    _note("lookup_order")
    return f"{order_id}: charged twice, 40 EUR each"


@function_tool(needs_approval=True)
def issue_refund(order_id: str, amount_eur: int) -> str:
    """Refund a payment of an order."""
    _note("issue_refund")
    return f"refunded {amount_eur} EUR on {order_id}"


def _support_agent() -> Agent:
    return Agent(name="support", model="gpt-4.1-mini", tools=[lookup_order, issue_refund])


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def durable_approval_timing():
    AgentOperator.partial(
        task_id="handle_ticket",
        agent=_support_agent,
        prompt="Order O-77 was charged twice: refund the second payment.",
        durable=True,
        # A try the scheduler fails on resuming (Airflow 3.3) leaves the answer to the next; on a
        # loaded machine a call to the api-server may also fail a try before it asks.
        retries=2,
        # Longer than a busy worker takes to start the resumed try that a failed one left queued.
        retry_delay=timedelta(seconds=30),
    ).expand(openai_conn_id=[f"openai_timing_{index}" for index in range(INSTANCES)])


durable_approval_timing()
