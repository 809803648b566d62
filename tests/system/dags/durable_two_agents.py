"""
A @task that runs two agents one after the other against an OpenAI-compatible endpoint
(FAKE_OPENAI_BASE_URL); the system tests fail the second agent's last request on try 1.

Each tool run appends a line to DURABLE_TEST_OUT/tool_runs.txt.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.providers.common.compat.sdk import dag, task


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def durable_two_agents():
    @task(retries=1, retry_delay=timedelta(seconds=0))
    def forecast_and_report() -> str:
        from agents import Agent, OpenAIChatCompletionsModel, function_tool
        from openai import AsyncOpenAI

        from airflow.providers.common.ai.durable.openai_agents import run_durably_sync

        tool_runs = Path(os.environ["DURABLE_TEST_OUT"], "tool_runs.txt")

        @function_tool
        def weather(city: str) -> str:
            """The weather in a city."""
            with tool_runs.open("a") as file:
                file.write(f"weather {city}\n")
            return f"sunny in {city}"

        @function_tool
        def save_report(text: str) -> str:
            """Saves a report."""
            with tool_runs.open("a") as file:
                file.write(f"save_report {text}\n")
            return "saved"

        client = AsyncOpenAI(base_url=os.environ["FAKE_OPENAI_BASE_URL"], api_key="x", max_retries=0)
        model = OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client)
        forecaster = Agent(name="forecaster", model=model, tools=[weather])
        reporter = Agent(name="reporter", model=model, tools=[save_report])

        forecast = run_durably_sync(forecaster, "Forecast Paris.").final_output
        return run_durably_sync(reporter, f"Report: {forecast}").final_output

    forecast_and_report()


dag_object = durable_two_agents()

if __name__ == "__main__":
    dag_object.test()
