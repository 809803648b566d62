"""A user's own DAG, with no __main__ and no scripted model: scripts/offline.sh runs it offline."""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.common.compat.sdk import dag

from airflow.providers.common.ai.operators.agent import AgentOperator


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def my_own_agent():
    from agents import Agent

    AgentOperator(
        task_id="greet",
        agent=Agent(name="greeter", model="gpt-4.1-mini"),
        prompt="Say hello.",
        durable=True,
        retries=1,
        retry_delay=timedelta(seconds=0),
    )


my_own_agent()
