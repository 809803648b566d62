"""
Approvals answered at chosen moments, for tests/system/production/test_approval_timing.py (R-54):
one mapped task instance per answer, in two tasks, one without retries and one with a retry, each
instance with a model server of its own (connection ``openai_timing_<retries>_<map index>``), so
that the test tells whose requests are whose. Each tool notes each real run, with when it ran, in
DURABLE_TEST_OUT/approval_tool_calls.jsonl, with its task, map index and try.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timedelta
from pathlib import Path

from agents import Agent, function_tool
from airflow.providers.common.compat.sdk import dag, get_current_context

from airflow.providers.common.ai.operators.agent import AgentOperator

#: How many task instances each task has, each answered at its own moment.
INSTANCES = 8
#: The retries of each task: an answer must resume a task that has none.
RETRIES = (0, 1)


def _note(tool: str) -> None:
    ti = get_current_context()["ti"]
    note = {
        "run_id": ti.run_id,
        "task_id": ti.task_id,
        "map_index": ti.map_index,
        "try": ti.try_number,
        "tool": tool,
        "at": time.time(),
    }
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
    for retries in RETRIES:
        AgentOperator.partial(
            task_id=f"handle_ticket_retries_{retries}",
            agent=_support_agent,
            prompt="Order O-77 was charged twice: refund the second payment.",
            durable=True,
            retries=retries,
            # Longer than a busy worker takes to start the resumed try that a failed one left queued.
            retry_delay=timedelta(seconds=30),
        ).expand(openai_conn_id=[f"openai_timing_{retries}_{index}" for index in range(INSTANCES)])


durable_approval_timing()
