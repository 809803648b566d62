"""
The DAG of ``durable_telemetry.py`` with a Pydantic AI agent, for the test that its traces and
metrics are the OpenAI Agents SDK's (R-60, R-65): try 1 looks the ticket up and fails at its second
model request, try 2 replays the lookup and answers. The agent is built in the worker, its client
from the ``openai_default`` connection; the file parses without Pydantic AI.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.providers.common.compat.sdk import dag

from airflow.providers.common.ai.hooks.openai import OpenAIAgentsHook
from airflow.providers.common.ai.operators.agent import AgentOperator


def build_agent():
    from openai import AsyncOpenAI
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    client = AsyncOpenAI(**OpenAIAgentsHook("openai_default").get_client_kwargs())
    agent = Agent(OpenAIChatModel("gpt-4.1-mini", provider=OpenAIProvider(openai_client=client)), name="triage")

    @agent.tool_plain
    def lookup_ticket(ticket_id: str) -> str:
        """The ticket's text."""
        return f"{ticket_id}: I was charged twice"

    return agent


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def durable_telemetry_pydantic_ai():
    AgentOperator(
        task_id="triage",
        agent=build_agent,
        prompt="Triage ticket T-7.",
        durable=True,
        retries=1,
        retry_delay=timedelta(seconds=0),
    )


dag_object = durable_telemetry_pydantic_ai()

if __name__ == "__main__":
    dag_object.test()
