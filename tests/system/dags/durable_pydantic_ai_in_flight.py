"""
Durable Pydantic AI agents whose refund tool is cut off mid-call on try 1, for
tests/system/test_in_flight_calls.py: the Pydantic AI counterparts of the ``in_flight_verify`` DAGs
of dags/durable_in_flight.py, with the same payment service and the same marks.

The agent runs in ``AgentOperator(durable=True)``, built by a function in the worker at the start of
each try through Pydantic AI's real ``OpenAIChatModel`` against the ``openai_default`` connection's
endpoint (the DAG parses without Pydantic AI). The payment service is
DURABLE_TEST_OUT/payments.jsonl: a refund appends a line (no deduplication: a repeated call refunds
twice), which ``refund_made`` finds by idempotency key. On try 1 the tool refunds, says where it
runs (``in_refund_<dag_id>_<run_id>.json``) and waits: to be killed (SIGKILL or SIGTERM, by the
test) or cut off by the task's ``execution_timeout``, one DAG for each. The tool of
``in_flight_verify_pydantic_ai_late`` waits first and refunds after its ``execution_timeout``: the
try, stopped in a plain ``def`` tool, ends once the call has.
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

TASK = "refund_order"


def _payments() -> Path:
    return Path(os.environ["DURABLE_TEST_OUT"], "payments.jsonl")


def refund_made(key: str, arguments: Any) -> Any:
    """Asks the payment service whether a refund under ``key`` was made."""
    from airflow.providers.common.ai.durable.pydantic_ai import Happened

    lines = _payments().read_text().splitlines() if _payments().exists() else []
    made = [json.loads(line) for line in lines if json.loads(line)["key"] == key]
    return Happened(f"refund {made[0]['refund_id']} was already made") if made else None


def _cut_off_here(ti: Any, seconds: int) -> None:
    """Say where the tool runs, then wait: killed here (SIGKILL or SIGTERM), or cut off by execution_timeout."""
    current_journal().settle()  # the in-flight mark is stored (a guarded tool's was before it started)
    where = Path(os.environ["DURABLE_TEST_OUT"], f"in_refund_{ti.dag_id}_{ti.run_id}.json")
    where.write_text(json.dumps({"pid": os.getpid()}))
    # execution_timeout (30 s after the task started) stops the try, which ends once this call has.
    time.sleep(seconds)


def refund_agent() -> Any:
    from openai import AsyncOpenAI
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from airflow.providers.common.ai.durable.pydantic_ai import current_idempotency_key, in_flight
    from airflow.providers.common.ai.hooks.openai import OpenAIAgentsHook

    base_url = OpenAIAgentsHook.get_connection("openai_default").host
    client = AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    agent = Agent(OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client)), name="payments")

    @in_flight("verify", verify=refund_made)
    @agent.tool_plain
    def refund(order_id: str, amount_eur: int) -> str:
        """Refund a payment of an order."""
        ti = get_current_context()["ti"]
        late = ti.dag_id.endswith("_late")
        if ti.try_number == 1 and late:
            _cut_off_here(ti, seconds=45)  # the refund lands after execution_timeout
        with _payments().open("a") as payments:
            refund_id = f"P-{ti.dag_id}-{ti.try_number}"
            made = {
                "dag_id": ti.dag_id,
                "run_id": ti.run_id,
                "try": ti.try_number,
                "key": current_idempotency_key(),
                "refund_id": refund_id,
            }
            payments.write(json.dumps(made) + "\n")
        if ti.try_number == 1 and not late:
            _cut_off_here(ti, seconds=45 if ti.dag_id.endswith("_timeout") else 120)
        return f"refunded {amount_eur} EUR on {order_id} as {refund_id}"

    return agent


def _refund_dag(dag_id: str, **kwargs: Any) -> None:
    @dag(dag_id=dag_id, schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
    def in_flight_dag():
        AgentOperator(
            task_id=TASK,
            agent=refund_agent,
            prompt="Refund the second payment of order O-5.",
            durable=True,
            retries=1,
            retry_delay=timedelta(seconds=0),
            **kwargs,
        )

    globals()[dag_id] = in_flight_dag()


_refund_dag("in_flight_verify_pydantic_ai")
_refund_dag("in_flight_verify_pydantic_ai_timeout", execution_timeout=timedelta(seconds=30))
_refund_dag("in_flight_verify_pydantic_ai_sigterm")
_refund_dag("in_flight_verify_pydantic_ai_late", execution_timeout=timedelta(seconds=30))
