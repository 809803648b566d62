"""
An agent as a durable Airflow task: ``AgentOperator(durable=True)`` with ``retries``.

The agent triages a support ticket: it looks up the customer and their recent orders with two
tools, then answers with a structured ``Triage``. If the try fails after some of those calls (a
provider outage, a timeout, a worker that dies), the retry replays the calls it completed from
the task instance's journal and only asks the model what it never answered.

Run it: ``python example_dags/example_durable_agent.py`` (``bash scripts/demo.sh`` sets up
Airflow first). With ``OPENAI_API_KEY`` set it calls OpenAI; without, a local endpoint plays the
model and fails the third model request once, so try 1 fails and try 2 replays. A downstream
task reads the ``usage`` XCom of the agent task: what its last try used and what replaying saved.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Literal

from agents import Agent, function_tool

try:
    from airflow.sdk import dag, task
except ImportError:  # Airflow 2.11
    from airflow.decorators import dag, task
from pydantic import BaseModel

from airflow.providers.common.ai.operators.agent import AgentOperator

log = logging.getLogger(__name__)

# Stand-ins for a CRM and an order system.
CUSTOMERS = {"ada@example.com": {"customer_id": "C-1024", "plan": "business", "open_tickets": 2}}
ORDERS = {"C-1024": [{"order_id": "O-77", "status": "delivered", "total": 129.0, "delivered": "2026-01-12"}]}


# [START example_durable_agent_agent]
@function_tool
def get_customer(email: str) -> dict:
    """The customer with this e-mail address: their id, plan and number of open tickets."""
    log.info("Tool get_customer ran for %s", email)
    return CUSTOMERS.get(email, {"error": f"no customer with e-mail {email}"})


@function_tool
def get_recent_orders(customer_id: str) -> list[dict]:
    """The customer's orders of the last 90 days."""
    log.info("Tool get_recent_orders ran for %s", customer_id)
    return ORDERS.get(customer_id, [])


class Triage(BaseModel):
    category: Literal["billing", "shipping", "technical", "other"]
    priority: Literal["low", "normal", "urgent"]
    summary: str


triage_agent = Agent(
    name="triage",
    instructions=(
        "You triage support tickets. Look up the customer and their recent orders before you "
        "decide; business customers with a problem on a recent order are urgent."
    ),
    model="gpt-4.1-mini",
    tools=[get_customer, get_recent_orders],
    output_type=Triage,
)
# [END example_durable_agent_agent]


# [START example_durable_agent_dag]
@dag(
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    params={
        "email": "ada@example.com",
        "ticket": "I was charged twice for my last order. Please refund one of the payments.",
    },
)
def example_durable_agent():
    triage = AgentOperator(
        task_id="triage_ticket",
        agent=triage_agent,
        prompt="Ticket from {{ params.email }}:\n\n{{ params.ticket }}",
        openai_conn_id="openai_default",  # API key in the password, optional base URL in the host
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


example_dag = example_durable_agent()
# [END example_durable_agent_dag]

if __name__ == "__main__":
    from airflow.providers.common.ai.testing import reply
    from airflow.providers.common.ai.testing.examples import run_example

    # Offline (or with --serve PORT), the local endpoint answers the model requests in this order and fails request 3 once.
    offline_replies = [
        reply.tool_calls(("get_customer", {"email": "ada@example.com"}, "call_customer")),
        reply.tool_calls(("get_recent_orders", {"customer_id": "C-1024"}, "call_orders")),
        reply.text(
            '{"category": "billing", "priority": "urgent", "summary": '
            '"Business customer C-1024 was charged twice for order O-77 and asks for a refund."}'
        ),
    ]
    run_example(example_dag, "openai_default", offline_replies, fail_requests={3})
