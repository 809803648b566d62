"""
A @task that runs an agent and then skips itself (AirflowSkipException) against an
OpenAI-compatible endpoint (FAKE_OPENAI_BASE_URL). Try 1 fails after the agent ran; try 2
replays the agent and skips.

Each tool run appends a line to DURABLE_TEST_OUT/tool_runs.txt.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.providers.common.compat.sdk import AirflowSkipException, dag, get_current_context, task


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def durable_skipped():
    @task(retries=1, retry_delay=timedelta(seconds=0))
    def triage() -> str:
        from agents import Agent, OpenAIChatCompletionsModel, function_tool
        from openai import AsyncOpenAI

        from airflow.providers.common.ai.durable.openai_agents import run_durably_sync

        try_number = get_current_context()["ti"].try_number

        @function_tool
        def lookup_ticket(ticket_id: str) -> str:
            """The ticket's text."""
            with Path(os.environ["DURABLE_TEST_OUT"], "tool_runs.txt").open("a") as file:
                file.write(f"lookup_ticket {ticket_id} try {try_number}\n")
            return "a duplicate of T-0"

        client = AsyncOpenAI(base_url=os.environ["FAKE_OPENAI_BASE_URL"], api_key="x", max_retries=0)
        model = OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client)
        agent = Agent(name="triage", model=model, tools=[lookup_ticket])
        verdict = run_durably_sync(agent, "Triage T-1.").final_output
        if try_number == 1:
            raise RuntimeError("injected failure after the agent ran")
        raise AirflowSkipException(f"nothing to route: {verdict}")

    triage()


dag_object = durable_skipped()

if __name__ == "__main__":
    dag_object.test()
