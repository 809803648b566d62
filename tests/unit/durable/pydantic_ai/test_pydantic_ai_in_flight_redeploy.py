"""
A Pydantic AI tool call left in flight across a deploy that changes its run (R-56): the retry no
longer lines up with the journal, and the call is still resolved by the policy of the tool that has
its name now, given the arguments the recorded answer gave it, before the changed run makes a live
call; with the real ``OpenAIChatModel`` against the local OpenAI-compatible server.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

pytest.importorskip(
    "pydantic_ai.models.openai", reason="Pydantic AI is the optional extra [pydantic-ai], not installed here"
)

from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.pydantic_ai import (
    Happened,
    current_idempotency_key,
    in_flight,
    run_durably_sync,
)
from airflow.providers.common.ai.testing import FakeOpenAIServer, reply

REFUND = reply.tool_calls(("refund", {"order": "A-1"}, "call_1"))
#: The changed run's model asks for the refund again, under a call id of its own.
REFUND_AGAIN = reply.tool_calls(("refund", {"order": "A-1"}, "call_9"))


class WorkerDied(BaseException):
    """The try ends here as if its process were killed: nothing in Pydantic AI or the journal catches it."""


class Payments:
    """The payment service: the refunds made (by idempotency key) and what ``verify`` was asked."""

    def __init__(self) -> None:
        self.refunds: list[str] = []
        self.verified: list[tuple[str, Any]] = []
        self.dies = True

    def find(self, key: str, arguments: Any) -> Happened | None:
        self.verified.append((key, arguments))
        return Happened(f"refund {self.refunds.index(key) + 1} already made") if key in self.refunds else None

    def agent(self, server: FakeOpenAIServer, policy: Any, *, instructions: str, name: str = "refund") -> Agent:
        client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        agent = Agent(
            OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client)), instructions=instructions
        )

        def refund(order: str) -> str:
            """Refund an order."""
            self.refunds.append(current_idempotency_key())
            if self.dies:
                self.dies = False
                raise WorkerDied
            return f"refunded {order} as R-{len(self.refunds)}"

        refund.__name__ = name
        agent.tool_plain(policy(refund))
        return agent


class Tries:
    def __init__(self) -> None:
        self.storage = InMemoryStorage()
        self.journal: DurableJournal | None = None

    def attempt(self, agent: Agent, prompt: str = "Refund A-1.") -> Any:
        self.journal = DurableJournal(self.storage)
        with journal_scope(self.journal):
            return run_durably_sync(agent, prompt)

    def entries(self) -> dict[str, dict[str, Any]]:
        return {key: json.loads(text) for key, text in self.storage.entries.items() if text}


def _died_in_the_call(tries: Tries, payments: Payments, server: FakeOpenAIServer, policy: Any) -> str:
    with pytest.raises(WorkerDied):
        tries.attempt(payments.agent(server, policy, instructions="Refund."))
    assert tries.entries()["1.2"]["state"] == "in_flight"
    return payments.refunds[0]


def _tool_outputs(server: FakeOpenAIServer) -> list[str]:
    return [m["content"] for r in server.requests for m in r.body["messages"] if m["role"] == "tool"]


def test_a_call_in_flight_of_a_changed_run_is_verified_with_its_recorded_arguments_and_never_runs_again(caplog):
    payments = Payments()
    policy = in_flight("verify", verify=payments.find)
    tries = Tries()
    with FakeOpenAIServer([REFUND, REFUND_AGAIN, reply.text("Refunded.")]) as server:
        key = _died_in_the_call(tries, payments, server, policy)
        # A deploy changed the instructions: try 2's run no longer lines up with the journal.
        with caplog.at_level(logging.INFO):
            result = tries.attempt(payments.agent(server, policy, instructions="Refund orders, never twice."))

    assert result.output == "Refunded."
    assert payments.refunds == [key]  # exactly once, in try 1
    assert payments.verified == [(key, {"order": "A-1"})]
    # the changed run's call asked the same: it got the output verify gave, and did not run
    assert _tool_outputs(server) == ["refund 1 already made"]
    assert len(server.requests) == 3
    assert "was in flight when a try died and its run changed since; verify: it happened" in caplog.text
    assert tries.journal.stats.in_flight == [
        {"step": "1.2", "tool": "refund", "idempotency_key": key, "policy": "verify", "outcome": "it happened"}
    ]
    entries = tries.entries()
    assert (entries["1.2"]["state"], entries["1.2"]["meta"]["in_flight"]) == ("done", "verify: it happened")
    assert not [k for k, entry in entries.items() if entry.get("state") == "in_flight"]


def test_a_call_in_flight_of_a_changed_run_that_did_not_happen_runs_once_when_the_changed_run_asks_for_it():
    payments = Payments()
    policy = in_flight("verify", verify=payments.find)
    tries = Tries()
    with FakeOpenAIServer([REFUND, REFUND_AGAIN, reply.text("Refunded.")]) as server:
        _died_in_the_call(tries, payments, server, policy)
        payments.refunds.clear()  # the refund of try 1 never reached the service
        tries.attempt(payments.agent(server, policy, instructions="Refund orders, never twice."))

    assert len(payments.refunds) == 1 and len(payments.verified) == 1
    assert _tool_outputs(server) == ["refunded A-1 as R-1"]
    entries = tries.entries()
    assert (entries["1.2"]["state"], entries["1.2"]["meta"]["in_flight"]) == ("discarded", "verify: it did not happen")


def test_a_call_in_flight_verified_as_done_that_the_changed_run_never_asks_for_is_resolved_as_the_run_ends():
    payments = Payments()
    policy = in_flight("verify", verify=payments.find)
    tries = Tries()
    with FakeOpenAIServer([REFUND, reply.text("Nothing to do.")]) as server:
        key = _died_in_the_call(tries, payments, server, policy)
        tries.attempt(payments.agent(server, policy, instructions="Refund orders, never twice."))
    assert payments.refunds == [key] and len(payments.verified) == 1
    entry = tries.entries()["1.2"]
    assert (entry["state"], entry["meta"]["in_flight"]) == ("done", "verify: it happened")
    assert entry["result"] == {"output": "refund 1 already made"}


@pytest.mark.parametrize("policy", ["verify", "fail"])
def test_a_tool_renamed_by_a_deploy_stops_the_try_naming_the_call_in_flight(policy):
    payments = Payments()
    made = in_flight("verify", verify=payments.find) if policy == "verify" else in_flight("fail")
    tries = Tries()
    with FakeOpenAIServer([REFUND, reply.text("Refunded.")]) as server:
        key = _died_in_the_call(tries, payments, server, made)
        mark = tries.entries()["1.2"]
        with pytest.raises(Exception, match=r"no tool of the agent is named 'refund' now") as failed:
            tries.attempt(payments.agent(server, made, instructions="Refund.", name="refund_order"))
    assert type(failed.value).__name__ == "AirflowFailException"
    assert key in str(failed.value)
    # no request of the changed run was sent, nothing ran again, and the mark stays until resolved
    assert len(server.requests) == 1 and payments.refunds == [key] and payments.verified == []
    assert tries.entries()["1.2"] == mark
