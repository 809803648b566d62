"""
Durable agents whose refund tool is cut off mid-call on try 1, one DAG per in-flight policy and way
of dying, for tests/system/test_in_flight_calls.py.

The payment service is DURABLE_TEST_OUT/payments.jsonl: a refund appends a line (no deduplication:
a repeated call refunds twice), which ``refund_made`` finds by idempotency key. On try 1 the tool
refunds, says where it runs (``in_refund_<dag_id>_<run_id>.json``) and waits: to be killed (SIGKILL or
SIGTERM, by the test) or cut off by the task's ``execution_timeout``. ``in_flight_fail`` has
retries to spare: only a failure for good stops it at try 2.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from agents import Agent, function_tool
from airflow.providers.common.compat.sdk import dag, get_current_context

from airflow.providers.common.ai.durable.core.scope import current_journal
from airflow.providers.common.ai.durable.openai_agents import Happened, current_idempotency_key, in_flight
from airflow.providers.common.ai.operators.agent import AgentOperator

TASK = "refund_order"


def _payments() -> Path:
    return Path(os.environ["DURABLE_TEST_OUT"], "payments.jsonl")


def refund_made(key: str, arguments: Any) -> Happened | None:
    """Asks the payment service whether a refund under ``key`` was made."""
    lines = _payments().read_text().splitlines() if _payments().exists() else []
    made = [json.loads(line) for line in lines if json.loads(line)["key"] == key]
    return Happened(f"refund {made[0]['refund_id']} was already made") if made else None


def _refund_tool(policy: Any) -> Any:
    @function_tool
    def refund(order_id: str, amount_eur: int) -> str:
        """Refund a payment of an order."""
        ti = get_current_context()["ti"]
        key = current_idempotency_key()
        with _payments().open("a") as payments:
            refund_id = f"P-{ti.dag_id}-{ti.try_number}"
            made = {"dag_id": ti.dag_id, "run_id": ti.run_id, "try": ti.try_number, "key": key, "refund_id": refund_id}
            payments.write(json.dumps(made) + "\n")
        if ti.try_number == 1:
            current_journal().settle()  # the in-flight mark is stored (a guarded tool's was before it started)
            where = Path(os.environ["DURABLE_TEST_OUT"], f"in_refund_{ti.dag_id}_{ti.run_id}.json")
            where.write_text(json.dumps({"pid": os.getpid()}))
            # Killed here, or cut off by execution_timeout (30 s after the task started), which
            # waits for the call's end: a plain def tool's thread cannot be stopped.
            time.sleep(45 if ti.dag_id == "in_flight_verify_timeout" else 120)
        return f"refunded {amount_eur} EUR on {order_id} as {refund_id}"

    return policy(refund)


def _refund_dag(dag_id: str, policy: Any, retries: int = 1, **kwargs: Any) -> None:
    @dag(dag_id=dag_id, schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
    def in_flight_dag():
        AgentOperator(
            task_id=TASK,
            agent=lambda: Agent(name="payments", model="gpt-4.1-mini", tools=[_refund_tool(policy)]),
            prompt="Refund the second payment of order O-5.",
            openai_conn_id="openai_default",
            durable=True,
            retries=retries,
            retry_delay=timedelta(seconds=0),
            **kwargs,
        )

    globals()[dag_id] = in_flight_dag()


_refund_dag("in_flight_rerun", in_flight())
_refund_dag("in_flight_verify", in_flight("verify", verify=refund_made))
_refund_dag("in_flight_fail", in_flight("fail"), retries=3)
_refund_dag(
    "in_flight_verify_timeout", in_flight("verify", verify=refund_made), execution_timeout=timedelta(seconds=30)
)
_refund_dag("in_flight_verify_sigterm", in_flight("verify", verify=refund_made))
# Airflow before 3.2 has no human-in-the-loop: the policy is refused when the DAG file is parsed.
with contextlib.suppress(ValueError):
    _refund_dag("in_flight_ask", in_flight("ask"))
