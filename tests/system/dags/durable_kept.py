"""
A durable AgentOperator with keep_journal=True, for the tests of kept journals, their export, their
offline replay and a fork. Its tool notes each call in DURABLE_TEST_OUT/kept_tool_calls.jsonl.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

from agents import Agent, function_tool
from airflow.providers.common.compat.sdk import dag, get_current_context

from airflow.providers.common.ai.operators.agent import AgentOperator

INSTRUCTIONS = "Triage the ticket: name its team and its urgency."


@function_tool
def lookup_ticket(ticket_id: str) -> str:
    """The ticket's text."""
    ti = get_current_context()["ti"]
    with Path(os.environ["DURABLE_TEST_OUT"], "kept_tool_calls.jsonl").open("a") as calls:
        calls.write(json.dumps({"run_id": ti.run_id, "try": ti.try_number, "ticket_id": ticket_id}) + "\n")
    return f"{ticket_id}: I was charged twice"


def triage_agent(instructions: str = INSTRUCTIONS) -> Agent:
    return Agent(name="triage", model="gpt-4.1-mini", instructions=instructions, tools=[lookup_ticket])


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def durable_kept():
    AgentOperator(
        task_id="triage",
        agent=triage_agent(),
        prompt="Triage ticket T-5.",
        openai_conn_id="openai_default",
        durable=True,
        keep_journal=True,
    )


dag_object = durable_kept()

if __name__ == "__main__":
    dag_object.test()
