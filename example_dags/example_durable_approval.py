"""
A durable agent whose refunds a person approves: ``function_tool(needs_approval=True)`` in
``AgentOperator(durable=True)``.

The agent looks up the order of a ticket, then asks to refund it. The refund needs approval:
the task creates an Airflow human-in-the-loop request (agent, tool and masked arguments, options
Approve and Reject) and gives up its worker until someone answers in the Airflow UI (Required
Actions) or through the REST API. Then the task resumes: the lookup and both model calls replay
from the journal, the refund runs once if approved, and the agent goes on.

Run it on Airflow 3.3: ``python example_dags/example_durable_approval.py`` (``bash
scripts/demo.sh`` sets up Airflow first), then answer the request in the UI (Required Actions)
of an api-server on the same database. With ``OPENAI_API_KEY`` set it calls OpenAI; without, a
local endpoint plays the model. On Airflow 3.2 run it under a scheduler and a triggerer:
``dag.test()`` of 3.2 cannot wait for a human-in-the-loop answer.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from agents import Agent, function_tool

try:
    from airflow.sdk import dag
except ImportError:  # Airflow 2.11, which refuses approvals when it parses this DAG (they need 3.2+)
    from airflow.decorators import dag

from airflow.providers.common.ai.operators.agent import AgentOperator

log = logging.getLogger(__name__)

# A stand-in for an order system.
ORDERS = {"O-77": {"customer": "ada@example.com", "payments": [40.0, 40.0], "status": "delivered"}}


# [START example_durable_approval_agent]
@function_tool
def lookup_order(order_id: str) -> dict:
    """The order: its customer, its payments and its status."""
    log.info("Tool lookup_order ran for %s", order_id)
    return ORDERS.get(order_id, {"error": f"no order {order_id}"})


# A refund moves money: a person approves each call before it runs.
@function_tool(needs_approval=True)
def issue_refund(order_id: str, amount_eur: float) -> str:
    """Refund an amount of an order's payment."""
    log.info("Tool issue_refund ran for %s: %s EUR", order_id, amount_eur)
    return f"refunded {amount_eur} EUR on {order_id}"


support_agent = Agent(
    name="support",
    instructions="You handle refund requests. Look up the order first; refund a double charge once.",
    model="gpt-4.1-mini",
    tools=[lookup_order, issue_refund],
)
# [END example_durable_approval_agent]


# [START example_durable_approval_dag]
@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def example_durable_approval():
    AgentOperator(
        task_id="handle_refund",
        agent=support_agent,
        prompt="Ticket from ada@example.com: order O-77 was charged twice, please refund one payment.",
        openai_conn_id="openai_default",
        durable=True,
        retries=2,
        # Who may answer, how long the request waits, and what a timeout decides (HITLOperator's names).
        assigned_users=None,
        response_timeout=timedelta(hours=4),
        defaults="Reject",
    )


example_dag = example_durable_approval()
# [END example_durable_approval_dag]

if __name__ == "__main__":
    from airflow.providers.common.ai.testing import reply
    from airflow.providers.common.ai.testing.examples import run_example

    # Offline (or with --serve PORT), the local endpoint answers the model requests in this order.
    offline_replies = [
        reply.tool_calls(("lookup_order", {"order_id": "O-77"}, "call_lookup")),
        reply.tool_calls(("issue_refund", {"order_id": "O-77", "amount_eur": 40.0}, "call_refund")),
        reply.text("Refunded the second payment of 40 EUR on order O-77."),
    ]
    run_example(example_dag, "openai_default", offline_replies)
