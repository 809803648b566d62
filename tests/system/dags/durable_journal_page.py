"""
Task instances for the journal page tests: a ``@task`` that runs a researcher agent (whose tool
asks an expert agent: a nested run) and then a writer agent, and fails after both on try 1.

``kept`` has no retries: it fails for good and its journal stays. ``replayed`` retries: try 2
replays the researcher and its tool, while the writer, asked with the try number in its prompt,
diverges and runs live; it succeeds, its journal is deleted, its tries' summaries are kept.
Each has a budget (UsageBudget, never reached), which the journal page shows as a table under
the tries. Each task pushes its durable_usage() to XCom under "durable_usage". ``adversarial``
runs no agent: the tests store summaries of other types under it, as a task instance Airflow knows.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from agents import Agent, RunConfig, function_tool
from airflow.providers.common.compat.sdk import dag, get_current_context, task

from airflow.providers.common.ai.durable.core.usage import durable_usage
from airflow.providers.common.ai.durable.openai_agents import UsageBudget, run_durably, run_durably_sync
from airflow.providers.common.ai.hooks.openai import OpenAIAgentsHook


def _run_config() -> RunConfig:
    return RunConfig(model_provider=OpenAIAgentsHook("openai_default").get_model_provider())


@function_tool
async def ask_expert(question: str) -> str:
    """Asks the billing expert."""
    expert = Agent(name="expert", model="gpt-4.1-nano", instructions="Answer in one line.")
    return (await run_durably(expert, question, run_config=_run_config())).final_output


researcher = Agent(name="researcher", model="gpt-4.1-mini", tools=[ask_expert])
writer = Agent(name="writer", model="gpt-4.1", instructions="Write a short reply.")
#: The task instance's budget over its tries, for the page's budget table (the docs' screenshots).
BUDGET = UsageBudget(max_requests=20, max_cost_usd=0.01)


def _two_agents() -> str:
    context = get_current_context()
    ti = context["ti"]
    facts = run_durably_sync(
        researcher, "Why was ada@example.com charged twice?", run_config=_run_config(), budget=BUDGET
    )
    reply = run_durably_sync(
        writer,
        f"Write the reply (try {ti.try_number}): {facts.final_output}",
        run_config=_run_config(),
        budget=BUDGET,
    )
    usage = durable_usage()
    ti.xcom_push(key="durable_usage", value=usage.to_dict() if usage is not None else None)
    if ti.try_number == 1:
        raise RuntimeError("the outbox was full")
    return reply.final_output


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def durable_journal_page():
    @task(retries=0)
    def kept() -> str:
        return _two_agents()

    @task(retries=1, retry_delay=timedelta(seconds=0), trigger_rule="all_done")
    def replayed() -> str:
        return _two_agents()

    @task
    def adversarial() -> None:
        pass

    kept() >> replayed()
    adversarial()


dag_object = durable_journal_page()

if __name__ == "__main__":
    dag_object.test()
