"""
A durable AgentOperator without retries, for the tests that clear it: after it failed for good,
and after it succeeded. Its tool notes each call in DURABLE_TEST_OUT/cleared_tool_calls.jsonl.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

from agents import Agent, function_tool
from airflow.providers.common.compat.sdk import dag, get_current_context

from airflow.providers.common.ai.operators.agent import AgentOperator


@function_tool
def lookup_ticket(ticket_id: str) -> str:
    """The ticket's text."""
    ti = get_current_context()["ti"]
    with Path(os.environ["DURABLE_TEST_OUT"], "cleared_tool_calls.jsonl").open("a") as calls:
        calls.write(json.dumps({"run_id": ti.run_id, "try": ti.try_number}) + "\n")
    return f"{ticket_id}: I was charged twice"


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def durable_cleared():
    AgentOperator(
        task_id="triage",
        agent=Agent(name="triage", model="gpt-4.1-mini", tools=[lookup_ticket]),
        prompt="Triage ticket T-5.",
        openai_conn_id="openai_default",
        durable=True,
    )


dag_object = durable_cleared()

if __name__ == "__main__":
    dag_object.test()
