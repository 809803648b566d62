"""
Agents inside your own ``@task``, durable: ``run_durably_sync`` with ``retries``.

The task runs two agents: one summarizes a support ticket, the other writes the customer a
reply and sends it with a tool. Each ``run_durably_sync`` call is journaled, and the journal is
kept until the whole task succeeds, so a try that fails in the second agent replays the first
one as well. The sending tool has a side effect, so it asks for the call's idempotency key: if a
try dies while the tool runs, the retry runs that call again with the same key, and the tool
sees that the reply went out already instead of sending it twice. The task pushes what its
agents used, and what replaying saved, to XCom under ``usage``.

Run it: ``python example_dags/example_durable_task.py``. With ``OPENAI_API_KEY`` set it calls
OpenAI; without, a local endpoint plays the model and fails the third model request once.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

from agents import Agent, RunConfig, function_tool

try:
    from airflow.sdk import dag, task
except ImportError:  # Airflow 2.11
    from airflow.decorators import dag, task

from airflow.providers.common.ai.durable.core.usage import durable_usage
from airflow.providers.common.ai.durable.openai_agents import current_idempotency_key, run_durably_sync
from airflow.providers.common.ai.hooks.openai import OpenAIAgentsHook

log = logging.getLogger(__name__)

# A folder stands in for a mail service here.
OUTBOX = Path(os.environ.get("EXAMPLE_OUTBOX", Path(tempfile.gettempdir(), "airflow_example_outbox")))


# [START example_durable_task_idempotent_tool]
@function_tool
def send_reply(ticket_id: str, text: str) -> str:
    """Send the reply to the customer who opened the ticket; returns the message id."""
    # The same key on every try for this call: a real mail or payment API takes it as its
    # Idempotency-Key header and sends once, however often it is asked.
    key = current_idempotency_key()
    sent = OUTBOX / f"{key}.json"
    if sent.exists():
        log.info("Tool send_reply: the reply to ticket %s went out already (key %s)", ticket_id, key)
        return json.loads(sent.read_text())["message_id"]
    message = {"message_id": f"msg-{key[-12:]}", "ticket_id": ticket_id, "text": text}
    OUTBOX.mkdir(parents=True, exist_ok=True)
    partial = sent.with_suffix(".partial")
    partial.write_text(json.dumps(message))
    partial.replace(sent)  # all or nothing, as a real send is
    log.info("Tool send_reply sent the reply to ticket %s (key %s)", ticket_id, key)
    return message["message_id"]


# [END example_durable_task_idempotent_tool]


summarizer = Agent(
    name="summarizer",
    instructions="Summarize the support ticket in one sentence for the support team.",
    model="gpt-4.1-mini",
)
responder = Agent(
    name="responder",
    instructions=(
        "Write the customer a short, friendly reply about their ticket and send it with send_reply, "
        "then confirm in one sentence what you sent."
    ),
    model="gpt-4.1-mini",
    tools=[send_reply],
)


# [START example_durable_task_dag]
@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def example_durable_task():
    @task(retries=1, retry_delay=timedelta(seconds=2))
    def answer_ticket(ticket_id: str, text: str, ti=None) -> dict:
        run_config = RunConfig(model_provider=OpenAIAgentsHook("openai_default").get_model_provider())
        summary = run_durably_sync(summarizer, text, run_config=run_config).final_output
        # A failure from here on replays the summary too: the journal lives until the task succeeds.
        sent = run_durably_sync(responder, f"Ticket {ticket_id}: {summary}", run_config=run_config)
        # What this try's agents used and what replaying saved, in XCom as AgentOperator puts it.
        ti.xcom_push(key="usage", value=durable_usage().to_dict())
        return {"summary": summary, "confirmation": sent.final_output}

    answer_ticket("T-311", "My parcel was marked delivered on Monday but it never arrived. Can you help?")


example_dag = example_durable_task()
# [END example_durable_task_dag]

if __name__ == "__main__":
    from airflow.providers.common.ai.testing import reply
    from airflow.providers.common.ai.testing.examples import run_example

    # Offline (or with --serve PORT), the local endpoint answers the model requests in this order and fails request 3 once.
    offline_replies = [
        reply.text("Customer's parcel shows as delivered on Monday but never arrived."),
        reply.tool_calls(
            (
                "send_reply",
                {
                    "ticket_id": "T-311",
                    "text": "Sorry about your parcel! We have opened a trace with the carrier.",
                },
                "call_send",
            )
        ),
        reply.text("Sent the customer an apology and told them we opened a trace with the carrier."),
    ]
    run_example(example_dag, "openai_default", offline_replies, fail_requests={3})
