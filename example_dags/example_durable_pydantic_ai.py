"""
A Pydantic AI agent as a durable Airflow task: ``AgentOperator(agent=..., durable=True)`` with
``retries``, the same as for an OpenAI Agents SDK agent (``example_durable_agent.py``).

The agent triages a support ticket: it looks up the customer and their recent orders with two
tools, then answers with a structured ``Triage``. If the try fails after some of those calls, the
retry replays the calls it completed from the task instance's journal and only asks the model
what it never answered. It needs the extra: ``pip install 'apache-airflow-providers-common-ai[pydantic-ai]'``.

Run it: ``python example_dags/example_durable_pydantic_ai.py``. With ``OPENAI_API_KEY`` set it
calls OpenAI; without, a local endpoint plays the model and fails the third model request once,
so try 1 fails and try 2 replays. A downstream task reads the ``usage`` XCom of the agent task.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Literal

try:
    from airflow.sdk import dag, task
except ImportError:  # Airflow 2.11
    from airflow.decorators import dag, task
from pydantic import BaseModel

from airflow.providers.common.ai.hooks.openai import OpenAIAgentsHook
from airflow.providers.common.ai.operators.agent import AgentOperator

log = logging.getLogger(__name__)

# Stand-ins for a CRM and an order system.
CUSTOMERS = {"ada@example.com": {"customer_id": "C-1024", "plan": "business", "open_tickets": 2}}
ORDERS = {"C-1024": [{"order_id": "O-77", "status": "delivered", "total": 129.0, "delivered": "2026-01-12"}]}


# [START example_durable_pydantic_ai_agent]
def get_customer(email: str) -> dict:
    """The customer with this e-mail address: their id, plan and number of open tickets."""
    log.info("Tool get_customer ran for %s", email)
    return CUSTOMERS.get(email, {"error": f"no customer with e-mail {email}"})


def get_recent_orders(customer_id: str) -> list[dict]:
    """The customer's orders of the last 90 days."""
    log.info("Tool get_recent_orders ran for %s", customer_id)
    return ORDERS.get(customer_id, [])


class Triage(BaseModel):
    category: Literal["billing", "shipping", "technical", "other"]
    priority: Literal["low", "normal", "urgent"]
    summary: str


def build_triage_agent():
    """
    The agent, built in the worker at the start of each try (``AgentOperator`` calls the function):
    its model's client takes the key and base URL of the ``openai_default`` connection, which a DAG
    file should not read while it is parsed.
    """
    from openai import AsyncOpenAI
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    client = AsyncOpenAI(**OpenAIAgentsHook("openai_default").get_client_kwargs())
    return Agent(
        OpenAIChatModel("gpt-4.1-mini", provider=OpenAIProvider(openai_client=client)),
        name="triage",
        instructions=(
            "You triage support tickets. Look up the customer and their recent orders before you "
            "decide; business customers with a problem on a recent order are urgent."
        ),
        tools=[get_customer, get_recent_orders],
        output_type=Triage,
    )


# [END example_durable_pydantic_ai_agent]


# [START example_durable_pydantic_ai_dag]
@dag(
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    params={
        "email": "ada@example.com",
        "ticket": "I was charged twice for my last order. Please refund one of the payments.",
    },
)
def example_durable_pydantic_ai():
    triage = AgentOperator(
        task_id="triage_ticket",
        agent=build_triage_agent,
        prompt="Ticket from {{ params.email }}:\n\n{{ params.ticket }}",
        durable=True,
        retries=1,
        retry_delay=timedelta(seconds=2),  # short for the demo; minutes suit a provider outage
    )

    @task
    def report_usage(ti=None) -> dict:
        # AgentOperator pushes what its last try used, and what the replay saved, under "usage".
        usage = ti.xcom_pull(task_ids="triage_ticket", key="usage")
        log.info(
            "triage_ticket: %d model requests, %d tokens; replaying saved %d requests, %d tokens",
            usage["requests"],
            usage["total_tokens"],
            usage["saved"]["requests"],
            usage["saved"]["tokens"],
        )
        return usage

    triage >> report_usage()


example_dag = example_durable_pydantic_ai()
# [END example_durable_pydantic_ai_dag]

if __name__ == "__main__":
    from airflow.providers.common.ai.testing import reply
    from airflow.providers.common.ai.testing.examples import run_example

    # Offline (or with --serve PORT), the local endpoint answers the model requests in this order and
    # fails request 3 once. Pydantic AI asks for a structured output through its "final_result" tool.
    offline_replies = [
        reply.tool_calls(("get_customer", {"email": "ada@example.com"}, "call_customer")),
        reply.tool_calls(("get_recent_orders", {"customer_id": "C-1024"}, "call_orders")),
        reply.tool_calls(
            (
                "final_result",
                {
                    "category": "billing",
                    "priority": "urgent",
                    "summary": "Business customer C-1024 was charged twice for order O-77 and asks for a refund.",
                },
                "call_triage",
            )
        ),
    ]
    run_example(example_dag, "openai_default", offline_replies, fail_requests={3})
