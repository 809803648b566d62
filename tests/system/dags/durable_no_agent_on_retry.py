"""
A @task whose try 1 runs an agent (whose tool asks an expert agent: a nested run) and fails after
it, and whose try 2 finds nothing left to do and succeeds without running an agent: its journal,
what try 1 recorded, must go all the same (R-52). Against FAKE_OPENAI_BASE_URL.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.providers.common.compat.sdk import dag, get_current_context, task


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def durable_no_agent_on_retry():
    @task(retries=1, retry_delay=timedelta(seconds=0))
    def triage() -> str:
        from agents import Agent, OpenAIChatCompletionsModel, function_tool
        from openai import AsyncOpenAI

        from airflow.providers.common.ai.durable.openai_agents import run_durably, run_durably_sync

        if get_current_context()["ti"].try_number > 1:
            return "the ticket was closed meanwhile"
        client = AsyncOpenAI(base_url=os.environ["FAKE_OPENAI_BASE_URL"], api_key="x", max_retries=0)

        @function_tool
        async def ask_expert(question: str) -> str:
            """Asks the billing expert."""
            expert = Agent(name="expert", model=OpenAIChatCompletionsModel(model="gpt-4.1-nano", openai_client=client))
            return (await run_durably(expert, question)).final_output

        model = OpenAIChatCompletionsModel(model="gpt-4.1-mini", openai_client=client)
        verdict = run_durably_sync(Agent(name="triage", model=model, tools=[ask_expert]), "Triage T-1.")
        raise RuntimeError(f"the outbox was full: {verdict.final_output}")

    triage()


dag_object = durable_no_agent_on_retry()

if __name__ == "__main__":
    dag_object.test()
