"""
A mapped durable AgentOperator: one task instance per prompt, each with a journal of its own.

Its tool answers with the map index of the task instance that runs it, so a model request shows
whose conversation it carries.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from agents import Agent, function_tool
from airflow.providers.common.compat.sdk import dag, get_current_context

from airflow.providers.common.ai.operators.agent import AgentOperator

log = logging.getLogger(__name__)


@function_tool
def lookup_ticket() -> str:
    """The ticket this task instance triages."""
    ti = get_current_context()["ti"]
    log.info("Tool lookup_ticket ran for map index %s on try %s", ti.map_index, ti.try_number)
    return f"the ticket of map index {ti.map_index}"


def build_agent() -> Agent:
    # A function, not an Agent: Airflow stores .partial() arguments in the serialized DAG, and a
    # function is stored as its source, which stays the same from one parse to the next.
    return Agent(
        name="triage",
        instructions="Look up the ticket, then triage it.",
        model="gpt-4.1-mini",
        tools=[lookup_ticket],
    )


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def durable_agent_mapped():
    AgentOperator.partial(
        task_id="triage",
        agent=build_agent,
        openai_conn_id="openai_default",
        durable=True,
        retries=1,
        retry_delay=timedelta(seconds=0),
    ).expand(prompt=["Ticket A: please refund my order", "Ticket B: I cannot log in"])


dag_object = durable_agent_mapped()

if __name__ == "__main__":
    dag_object.test()
