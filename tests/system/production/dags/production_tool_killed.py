"""
A durable ``@task`` whose Celery worker the production test kills with SIGKILL in a tool call.

The agent looks a ticket up, then sends a reply with a tool that has a side effect. On try 1 the
reply tool writes the message, says where it runs (``in_send_reply.json``: the task process and
the worker's name) and waits to be killed; the retry runs on another worker. DURABLE_TEST_OUT
names the folder for the outbox and for what each tool call saw.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timedelta
from pathlib import Path

from agents import Agent, RunConfig, function_tool
from airflow.providers.common.compat.sdk import dag, get_current_context, task

from airflow.providers.common.ai.durable.core.scope import current_journal
from airflow.providers.common.ai.durable.openai_agents import current_idempotency_key, run_durably_sync
from airflow.providers.common.ai.hooks.openai import OpenAIAgentsHook


def _out() -> Path:
    return Path(os.environ["DURABLE_TEST_OUT"])


def _note(name: str, **fields) -> None:
    ti = get_current_context()["ti"]
    note = {"tool": name, "try": ti.try_number, "worker": os.environ.get("DURABLE_WORKER_NAME"), **fields}
    with (_out() / "tool_calls.jsonl").open("a") as calls:
        calls.write(json.dumps(note) + "\n")


@function_tool
def lookup_ticket(ticket_id: str) -> str:
    """The ticket's text."""
    _note("lookup_ticket")
    return f"{ticket_id}: the parcel never arrived"


@function_tool
def send_reply(ticket_id: str, text: str) -> str:
    """Send the customer a reply."""
    key = current_idempotency_key()
    sent = _out() / "outbox" / f"{key}.json"
    already_sent = sent.exists()
    _note("send_reply", key=key, already_sent=already_sent)
    if not already_sent:
        sent.parent.mkdir(exist_ok=True)
        sent.write_text(json.dumps({"ticket_id": ticket_id, "text": text}))
    if get_current_context()["ti"].try_number == 1:
        # The journal writes this call's in-flight mark while the tool runs: the test kills
        # the worker once the mark is in the store, as it would be after the tool had worked a while.
        current_journal().settle()
        marker = {"pid": os.getpid(), "worker": os.environ.get("DURABLE_WORKER_NAME")}
        (_out() / "in_send_reply.json").write_text(json.dumps(marker))
        time.sleep(600)  # the test kills this worker here
    return "sent"


agent = Agent(name="support", model="gpt-4.1-mini", tools=[lookup_ticket, send_reply])


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def production_tool_killed():
    @task(retries=1, retry_delay=timedelta(seconds=0))
    def answer_ticket() -> str:
        run_config = RunConfig(model_provider=OpenAIAgentsHook("openai_default").get_model_provider())
        return run_durably_sync(agent, "Answer ticket T-9.", run_config=run_config).final_output

    answer_ticket()


production_tool_killed()
