"""
A @task that streams a durable agent run (run_durably_streamed) against an OpenAI-compatible
endpoint (FAKE_OPENAI_BASE_URL), through the Responses API or Chat Completions (OPENAI_API_KIND);
the system test cuts the second answer's stream off on try 1.

Each tool run appends a line to DURABLE_TEST_OUT/tool_runs.txt; each try writes the events its
consumer saw to DURABLE_TEST_OUT/try<N>.json.
"""

from __future__ import annotations

import asyncio
import json
import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.providers.common.compat.sdk import dag, get_current_context, task


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def durable_streamed():
    @task(retries=1, retry_delay=timedelta(seconds=0))
    def stream_forecast() -> str:
        # A sync task around the async run: Airflow 2.11 does not await an async task.
        return asyncio.run(streamed_forecast())

    async def streamed_forecast() -> str:
        from agents import Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, function_tool
        from openai import AsyncOpenAI

        from airflow.providers.common.ai.durable.openai_agents import run_durably_streamed

        out = Path(os.environ["DURABLE_TEST_OUT"])

        @function_tool
        def weather(city: str) -> str:
            """The weather in a city."""
            with (out / "tool_runs.txt").open("a") as file:
                file.write(f"weather {city}\n")
            return f"sunny in {city}"

        client = AsyncOpenAI(base_url=os.environ["FAKE_OPENAI_BASE_URL"], api_key="x", max_retries=0)
        kind = OpenAIResponsesModel if os.environ["OPENAI_API_KIND"] == "responses" else OpenAIChatCompletionsModel
        agent = Agent(name="a", model=kind(model="gpt-4o", openai_client=client), tools=[weather])
        seen: list[str] = []
        log = out / f"try{get_current_context()['ti'].try_number}.json"
        try:
            result = run_durably_streamed(agent, "Forecast Paris.")
            async for event in result.stream_events():
                if event.type == "run_item_stream_event":
                    seen.append(f"item {event.name}")
                elif event.type == "raw_response_event" and event.data.type == "response.completed":
                    seen.append("completed")
            return result.final_output
        finally:
            log.write_text(json.dumps(seen))

    stream_forecast()


dag_object = durable_streamed()

if __name__ == "__main__":
    dag_object.test()
