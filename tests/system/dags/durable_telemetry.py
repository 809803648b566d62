"""
A durable AgentOperator with one retry, for the test of its traces and metrics (R-60): try 1 looks
the ticket up and fails at its second model request, try 2 replays the lookup and answers.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from agents import Agent, function_tool
from airflow.providers.common.compat.sdk import dag

from airflow.providers.common.ai.operators.agent import AgentOperator


@function_tool
def lookup_ticket(ticket_id: str) -> str:
    """The ticket's text."""
    return f"{ticket_id}: I was charged twice"


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def durable_telemetry():
    AgentOperator(
        task_id="triage",
        agent=Agent(name="triage", model="gpt-4.1-mini", tools=[lookup_ticket]),
        prompt="Triage ticket T-7.",
        openai_conn_id="openai_default",
        durable=True,
        retries=1,
        retry_delay=timedelta(seconds=0),
    )


dag_object = durable_telemetry()

if __name__ == "__main__":
    dag_object.test()
