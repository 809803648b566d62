"""
A @task whose agent keeps its conversation in the SDK's SQLiteSession (a file in DURABLE_TEST_OUT)
against an OpenAI-compatible endpoint (FAKE_OPENAI_BASE_URL); the system test fails the second
request on try 1. The session already holds an earlier exchange when the task starts.

Each tool run appends a line to DURABLE_TEST_OUT/tool_runs.txt; the task writes the session's
items after success to DURABLE_TEST_OUT/session.json.
"""

from __future__ import annotations

import asyncio
import json
import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.providers.common.compat.sdk import dag, task


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def durable_session():
    @task(retries=1, retry_delay=timedelta(seconds=0))
    def answer_ada() -> str:
        from agents import Agent, OpenAIChatCompletionsModel, SQLiteSession, function_tool
        from openai import AsyncOpenAI

        from airflow.providers.common.ai.durable.openai_agents import run_durably_sync

        out = Path(os.environ["DURABLE_TEST_OUT"])

        @function_tool
        def weather(city: str) -> str:
            """The weather in a city."""
            with (out / "tool_runs.txt").open("a") as file:
                file.write(f"weather {city}\n")
            return f"sunny in {city}"

        session = SQLiteSession("ada", str(out / "sessions.db"))
        client = AsyncOpenAI(base_url=os.environ["FAKE_OPENAI_BASE_URL"], api_key="x", max_retries=0)
        agent = Agent(name="a", model=OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client), tools=[weather])
        answer = run_durably_sync(agent, "What is the weather in Paris?", session=session).final_output
        (out / "session.json").write_text(json.dumps(asyncio.run(session.get_items())))
        return answer

    answer_ada()


dag_object = durable_session()

if __name__ == "__main__":
    asyncio.run(
        __import__("agents")
        .SQLiteSession("ada", str(Path(os.environ["DURABLE_TEST_OUT"], "sessions.db")))
        .add_items([{"role": "user", "content": "Hi, I am Ada."}, {"role": "assistant", "content": "Hello Ada."}])
    )
    dag_object.test()
