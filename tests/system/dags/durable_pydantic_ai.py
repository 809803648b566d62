"""
A @task that runs a Pydantic AI agent durably, through Pydantic AI's real ``OpenAIChatModel``,
against an OpenAI-compatible endpoint (FAKE_OPENAI_BASE_URL); the system tests fail its second
request on try 1. DURABLE_PROMPT, if set, is the prompt of try 2 (a deploy changed it).

Each tool run appends a line to DURABLE_TEST_OUT/tool_runs.txt.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.providers.common.compat.sdk import dag, get_current_context, task


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def durable_pydantic_ai():
    @task(retries=1, retry_delay=timedelta(seconds=0))
    def forecast() -> str:
        from openai import AsyncOpenAI
        from pydantic_ai import Agent
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        from airflow.providers.common.ai.durable.pydantic_ai import current_idempotency_key, run_durably_sync

        tool_runs = Path(os.environ["DURABLE_TEST_OUT"], "tool_runs.txt")
        client = AsyncOpenAI(base_url=os.environ["FAKE_OPENAI_BASE_URL"], api_key="x", max_retries=0)
        agent = Agent(OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client)), instructions="Brief.")

        @agent.tool_plain
        def weather(city: str) -> str:
            """The weather in a city."""
            with tool_runs.open("a") as file:
                file.write(f"weather {city} {current_idempotency_key()}\n")
            return f"sunny in {city}"

        prompt = "Weather in Paris?"
        if get_current_context()["ti"].try_number > 1:
            prompt = os.environ.get("DURABLE_PROMPT", prompt)
        return run_durably_sync(agent, prompt).output

    forecast()


dag_object = durable_pydantic_ai()

if __name__ == "__main__":
    dag_object.test()
