"""
A payment that happens exactly once, even when the try dies in the middle of it: ``in_flight``.

The agent refunds a customer with a tool whose service takes no idempotency key: called twice, it
refunds twice. It does keep the reference it is given, and can be asked for a refund by it. The
tool names the policy ``verify``: when a try dies while the refund call runs (the worker killed,
the task's ``execution_timeout``, a SIGTERM), whether the refund went through is unknown, and the
retry first asks the payment service, by the call's idempotency key, before it would run the call
again. If the refund is there, the model is told so and the tool does not run; if not, it runs.

Here the payment service's answer to a refund never comes back the first time (the refund is
made, then the connection hangs): the task's ``execution_timeout`` cuts try 1 off, and try 2
finds the refund by its key. Run it: ``python example_dags/example_durable_payment.py``. With
``OPENAI_API_KEY`` set it calls OpenAI; without, a local endpoint plays the model.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from agents import Agent, function_tool

try:
    from airflow.sdk import dag
except ImportError:  # Airflow 2.11
    from airflow.decorators import dag

from airflow.providers.common.ai.durable.openai_agents import Happened, current_idempotency_key, in_flight
from airflow.providers.common.ai.operators.agent import AgentOperator

log = logging.getLogger(__name__)


class PaymentService:
    """
    A stand-in for a payment provider, kept in a folder: every refund call makes a refund (no
    deduplication), with the reference it was given; refunds can be looked up by reference. The
    answer to the first call with a reference is lost on the way back, as a connection that hangs
    loses it.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    async def refund(self, order_id: str, amount_eur: int, reference: str) -> dict[str, Any]:
        self.folder.mkdir(parents=True, exist_ok=True)
        number = len(list(self.folder.glob("R-*.json"))) + 1
        refund = {"id": f"R-{number}", "order_id": order_id, "amount_eur": amount_eur, "reference": reference}
        (self.folder / f"{refund['id']}.json").write_text(json.dumps(refund))
        lost = self.folder / f"answer_lost_{reference}.json"
        if not lost.exists():
            lost.write_text(json.dumps({"pid": os.getpid()}))
            await asyncio.sleep(300)  # the refund is made; its answer never arrives
        return refund

    def find(self, reference: str) -> dict[str, Any] | None:
        for path in sorted(self.folder.glob("R-*.json")):
            refund = json.loads(path.read_text())
            if refund["reference"] == reference:
                return refund
        return None


payments = PaymentService(
    Path(os.environ.get("EXAMPLE_PAYMENTS", Path(tempfile.gettempdir(), "airflow_example_payments")))
)


# [START example_durable_payment_verified_tool]
def refund_issued(idempotency_key: str, arguments: dict) -> Happened | None:
    """Asks the payment service whether the refund of a call cut off mid-flight went through."""
    refund = payments.find(reference=idempotency_key)
    if refund is None:
        return None  # it did not: the call runs
    log.info("The refund of call %s went through as %s: it does not run again", idempotency_key, refund["id"])
    return Happened(f"Refund {refund['id']} of {refund['amount_eur']} EUR for {refund['order_id']} was issued.")


@in_flight("verify", verify=refund_issued)
@function_tool
async def issue_refund(order_id: str, amount_eur: int) -> str:
    """Refund ``amount_eur`` of an order to the customer."""
    refund = await payments.refund(order_id, amount_eur, reference=current_idempotency_key())
    return f"Refund {refund['id']} of {amount_eur} EUR for {order_id} was issued."


# [END example_durable_payment_verified_tool]

cashier = Agent(
    name="cashier",
    instructions="Refund what the customer is owed with issue_refund, then confirm it in one sentence.",
    model="gpt-4.1-mini",
    tools=[issue_refund],
)


# [START example_durable_payment_dag]
@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def example_durable_payment():
    AgentOperator(
        task_id="refund_customer",
        agent=cashier,
        prompt="Order O-1042 was charged twice, 40 EUR each. Refund the second charge.",
        openai_conn_id="openai_default",
        durable=True,
        retries=1,
        retry_delay=timedelta(seconds=2),
        # A try that hangs is cut off: the retry verifies the call it was in.
        execution_timeout=timedelta(seconds=20),
    )


example_dag = example_durable_payment()
# [END example_durable_payment_dag]

if __name__ == "__main__":
    from airflow.providers.common.ai.testing import reply
    from airflow.providers.common.ai.testing.examples import run_example

    # Offline (or with --serve PORT), the local endpoint answers the model requests in this order.
    offline_replies = [
        reply.tool_calls(("issue_refund", {"order_id": "O-1042", "amount_eur": 40}, "call_refund")),
        reply.text("I refunded the second charge of 40 EUR on order O-1042."),
    ]
    run_example(example_dag, "openai_default", offline_replies)
