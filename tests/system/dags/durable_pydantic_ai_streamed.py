"""
A @task that streams a Pydantic AI agent run durably (run_stream_durably), through Pydantic AI's
real ``OpenAIChatModel``, against an OpenAI-compatible endpoint (FAKE_OPENAI_BASE_URL); the system
test cuts the second answer's stream off on try 1.

Each tool run appends a line to DURABLE_TEST_OUT/tool_runs.txt; each try writes the text deltas
its consumer saw to DURABLE_TEST_OUT/try<N>.json.
"""

from __future__ import annotations

import asyncio
import json
import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.providers.common.compat.sdk import dag, get_current_context, task


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def durable_pydantic_ai_streamed():
    @task(retries=1, retry_delay=timedelta(seconds=0))
    def stream_forecast() -> str:
        # A sync task around the async run: Airflow 2.11 does not await an async task.
        return asyncio.run(streamed_forecast())

    async def streamed_forecast() -> str:
        from openai import AsyncOpenAI
        from pydantic_ai import Agent
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        from airflow.providers.common.ai.durable.pydantic_ai import current_idempotency_key, run_stream_durably

        out = Path(os.environ["DURABLE_TEST_OUT"])
        client = AsyncOpenAI(base_url=os.environ["FAKE_OPENAI_BASE_URL"], api_key="x", max_retries=0)
        agent = Agent(OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client)), instructions="Brief.")

        @agent.tool_plain
        def weather(city: str) -> str:
            """The weather in a city."""
            with (out / "tool_runs.txt").open("a") as file:
                file.write(f"weather {city} {current_idempotency_key()}\n")
            return f"sunny in {city}"

        seen: list[str] = []
        try:
            async with run_stream_durably(agent, "Forecast Paris.") as result:
                async for text in result.stream_text(delta=True, debounce_by=None):
                    seen.append(text)
            return "".join(seen)
        finally:
            (out / f"try{get_current_context()['ti'].try_number}.json").write_text(json.dumps(seen))

    stream_forecast()


dag_object = durable_pydantic_ai_streamed()

if __name__ == "__main__":
    dag_object.test()
