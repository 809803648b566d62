"""
The budget tasks of dags/durable_budget.py with a Pydantic AI agent, for
tests/system/test_budget_and_cost.py: each an ``AgentOperator`` whose agent function builds the
agent in the worker through Pydantic AI's real ``OpenAIChatModel`` against the ``openai_default``
connection's endpoint. Its model answers twice with a tool call
and then with text, and its third request fails on try 1.

``within_budget`` may send 4 requests over all its tries: try 1 sent 3 (the failed one counts),
try 2 replays the two answers for free and sends the third again. ``over_budget`` may send 3: try
2's request is refused before it is sent, and the task fails for good with retries left. Each tool
call appends to ``$DURABLE_TEST_OUT/<task_id>.calls``.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.providers.common.compat.sdk import dag
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from airflow.providers.common.ai.durable.pydantic_ai import UsageBudget
from airflow.providers.common.ai.hooks.openai import OpenAIAgentsHook
from airflow.providers.common.ai.operators.agent import AgentOperator


def _agent(task_id: str) -> Agent:
    base_url = OpenAIAgentsHook.get_connection("openai_default").host
    client = AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    agent = Agent(OpenAIChatModel("gpt-4.1-mini", provider=OpenAIProvider(openai_client=client)), name="support")

    @agent.tool_plain
    def look_up(order_id: str) -> str:
        """Looks an order up."""
        with Path(os.environ["DURABLE_TEST_OUT"], f"{task_id}.calls").open("a") as calls:
            calls.write(f"{order_id}\n")
        return f"order {order_id}: shipped"

    return agent


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def durable_pydantic_ai_budget():
    within = AgentOperator(
        task_id="within_budget",
        agent=lambda: _agent("within_budget"),
        prompt="Where are orders O-1 and O-2?",
        durable=True,
        retries=2,
        retry_delay=timedelta(seconds=0),
        budget=UsageBudget(max_requests=4, max_cost_usd=0.01),
    )
    over = AgentOperator(
        task_id="over_budget",
        agent=lambda: _agent("over_budget"),
        prompt="Where are orders O-3 and O-4?",
        durable=True,
        retries=2,
        retry_delay=timedelta(seconds=0),
        budget=UsageBudget(max_requests=3),
        trigger_rule="all_done",
    )
    within >> over


dag_object = durable_pydantic_ai_budget()

if __name__ == "__main__":
    dag_object.test()
