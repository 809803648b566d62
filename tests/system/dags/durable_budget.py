"""
Task instances for the budget and cost tests (R-58, R-59), each an ``AgentOperator`` whose model
answers twice with a tool call and then with text, and whose third request fails on try 1.

``within_budget`` may send 4 requests over all its tries: try 1 sent 3 (the failed one counts),
try 2 replays the two answers for free and sends the third again. ``over_budget`` may send 3: try
2's request is refused before it is sent, and the task fails for good with retries left. Each tool call appends to
``$DURABLE_TEST_OUT/<task_id>.calls``.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

from agents import Agent, function_tool
from airflow.providers.common.compat.sdk import dag

from airflow.providers.common.ai.durable.openai_agents import UsageBudget
from airflow.providers.common.ai.operators.agent import AgentOperator


def _agent(task_id: str) -> Agent:
    @function_tool
    def look_up(order_id: str) -> str:
        """Looks an order up."""
        with Path(os.environ["DURABLE_TEST_OUT"], f"{task_id}.calls").open("a") as calls:
            calls.write(f"{order_id}\n")
        return f"order {order_id}: shipped"

    return Agent(name="support", model="gpt-4.1-mini", tools=[look_up])


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def durable_budget():
    within = AgentOperator(
        task_id="within_budget",
        agent=lambda: _agent("within_budget"),
        prompt="Where are orders O-1 and O-2?",
        openai_conn_id="openai_default",
        durable=True,
        retries=2,
        retry_delay=timedelta(seconds=0),
        budget=UsageBudget(max_requests=4, max_cost_usd=0.01),
    )
    over = AgentOperator(
        task_id="over_budget",
        agent=lambda: _agent("over_budget"),
        prompt="Where are orders O-3 and O-4?",
        openai_conn_id="openai_default",
        durable=True,
        retries=2,
        retry_delay=timedelta(seconds=0),
        budget=UsageBudget(max_requests=3),
        trigger_rule="all_done",
    )
    within >> over


dag_object = durable_budget()

if __name__ == "__main__":
    dag_object.test()
