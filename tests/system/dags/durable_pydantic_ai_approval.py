"""
Durable Pydantic AI agents that a person answers through Airflow's human-in-the-loop, for
tests/system/test_pydantic_ai_approvals_in_airflow.py: ``durable_pydantic_ai_approval`` refunds an
order with a ``requires_approval=True`` tool; ``durable_pydantic_ai_in_flight_ask`` refunds with a
tool whose in-flight policy is ``ask``, and on try 1 waits in the refund to be killed.

The agents run in ``AgentOperator(durable=True)``, built by a function in the worker at the start of
each try (the DAG parses without Pydantic AI). Each tool notes each real run in
DURABLE_TEST_OUT/approval_tool_calls.jsonl; ``close_ticket`` fails on the task's first try when its
note says so, to fail a try after an approval.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.providers.common.compat.sdk import dag, get_current_context

from airflow.providers.common.ai.durable.core.scope import current_journal
from airflow.providers.common.ai.operators.agent import AgentOperator

TASK = "handle_ticket"


def _note(tool: str, **arguments: object) -> None:
    ti = get_current_context()["ti"]
    with Path(os.environ["DURABLE_TEST_OUT"], "approval_tool_calls.jsonl").open("a") as calls:
        note = {"run_id": ti.run_id, "try": ti.try_number, "tool": tool, "at": time.time(), **arguments}
        calls.write(json.dumps(note) + "\n")


def _model() -> Any:
    from openai import AsyncOpenAI
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from airflow.providers.common.ai.hooks.openai import OpenAIAgentsHook

    base_url = OpenAIAgentsHook.get_connection("openai_default").host
    client = AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    return OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client))


def support_agent() -> Any:
    from pydantic_ai import Agent

    agent = Agent(_model(), name="support")

    @agent.tool_plain
    def lookup_order(order_id: str) -> str:
        """The order's payments."""
        _note("lookup_order", order_id=order_id)
        return f"{order_id}: charged twice, 40 EUR each"

    @agent.tool_plain(requires_approval=True)
    def issue_refund(order_id: str, amount_eur: int) -> str:
        """Refund a payment of an order."""
        _note("issue_refund", order_id=order_id, amount_eur=amount_eur)
        return f"refunded {amount_eur} EUR on {order_id}"

    @agent.tool_plain
    def close_ticket(note: str) -> str:
        """Close the ticket with a note."""
        _note("close_ticket", note=note)
        if "fail once" in note and get_current_context()["ti"].try_number == 1:
            raise RuntimeError("the ticket system is down")
        return "closed"

    return agent


def refund_agent() -> Any:
    from pydantic_ai import Agent

    from airflow.providers.common.ai.durable.pydantic_ai import in_flight

    agent = Agent(_model(), name="payments")

    @in_flight("ask")
    @agent.tool_plain
    def refund(order_id: str, amount_eur: int) -> str:
        """Refund a payment of an order."""
        ti = get_current_context()["ti"]
        _note("refund", order_id=order_id)
        if ti.try_number == 1:
            current_journal().settle()  # the in-flight mark is stored
            where = Path(os.environ["DURABLE_TEST_OUT"], f"in_refund_{ti.dag_id}_{ti.run_id}.json")
            where.write_text(json.dumps({"pid": os.getpid()}))
            time.sleep(120)  # killed here by the test
        return f"refunded {amount_eur} EUR on {order_id}"

    return agent


@dag(dag_id="durable_pydantic_ai_approval", schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def durable_pydantic_ai_approval():
    AgentOperator(
        task_id=TASK,
        agent=support_agent,
        durable=True,
        prompt="Order O-77 was charged twice: refund the second payment, then close the ticket.",
        retries=1,
        retry_delay=timedelta(seconds=0),
    )


@dag(dag_id="durable_pydantic_ai_in_flight_ask", schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def durable_pydantic_ai_in_flight_ask():
    AgentOperator(
        task_id=TASK,
        agent=refund_agent,
        durable=True,
        prompt="Refund the second payment of order O-5.",
        retries=1,
        retry_delay=timedelta(seconds=0),
    )


durable_pydantic_ai_approval()
durable_pydantic_ai_in_flight_ask()
