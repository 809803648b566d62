"""
A Pydantic AI agent as durable tasks: ``AgentOperator(durable=True)``, then
``@task.agent(durable=True)``, both with an agent function that builds the agent in the worker
through Pydantic AI's real ``OpenAIChatModel`` against an OpenAI-compatible endpoint
(FAKE_OPENAI_BASE_URL); the system tests fail the second request of each task's first try. The
file parses without Pydantic AI (a scheduler on a line without the extra reads this folder).

Each tool run appends a line to DURABLE_TEST_OUT/tool_runs.txt.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.providers.common.compat.sdk import dag, task

from airflow.providers.common.ai.operators.agent import AgentOperator


def build_agent():
    from openai import AsyncOpenAI
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from airflow.providers.common.ai.durable.pydantic_ai import current_idempotency_key

    client = AsyncOpenAI(base_url=os.environ["FAKE_OPENAI_BASE_URL"], api_key="x", max_retries=0)
    agent = Agent(
        OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client)),
        name="forecaster",
        instructions="Brief.",
    )

    @agent.tool_plain
    def weather(city: str) -> str:
        """The weather in a city."""
        with Path(os.environ["DURABLE_TEST_OUT"], "tool_runs.txt").open("a") as file:
            file.write(f"weather {city} {current_idempotency_key()}\n")
        return f"sunny in {city}"

    return agent


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def durable_pydantic_ai_operator():
    forecast = AgentOperator(
        task_id="forecast",
        agent=build_agent,
        prompt="Weather in {{ params.city }}?",
        params={"city": "Paris"},
        durable=True,
        retries=1,
        retry_delay=timedelta(seconds=0),
    )

    @task.agent(agent=build_agent, durable=True, retries=1, retry_delay=timedelta(seconds=0))
    def forecast_decorated(city: str) -> str:
        return f"Weather in {city}?"

    forecast >> forecast_decorated("Rome")


dag_object = durable_pydantic_ai_operator()

if __name__ == "__main__":
    dag_object.test()
