"""
Pydantic AI runs a plain ``def`` tool in a thread that nothing stops. When the try is stopped while
it runs (``execution_timeout`` raised in the task's main thread, the run's task cancelled), the try
ends only once the call has: its effect is never made after the try, while the next try's
``verify`` looks or the call runs again; the call stays in flight for its policy. An ``async def``
tool is cancelled at once. With the real ``OpenAIChatModel`` against the local OpenAI-compatible
server.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
    run_durably,
    run_durably_sync,
)
from airflow.providers.common.ai.testing import FakeOpenAIServer, reply

REFUND = reply.tool_calls(("refund", {"order": "A-1"}, "call_1"))


class TaskTimedOut(Exception):
    """What Airflow's execution_timeout raises in the task's main thread."""


#: Set once the timeout was raised in the main thread.
TIMED_OUT = threading.Event()


@contextmanager
def execution_timeout() -> Iterator[None]:
    """The task's timeout, raised in the main thread by SIGALRM as Airflow raises it, once a tool arms it."""

    def timed_out(signum: int, frame: Any) -> None:
        TIMED_OUT.set()
        raise TaskTimedOut

    previous = signal.signal(signal.SIGALRM, timed_out)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def time_out_soon() -> None:
    """The task's execution_timeout passes a moment from now, while the calling tool still runs."""
    TIMED_OUT.clear()
    signal.setitimer(signal.ITIMER_REAL, 0.1)


class Payments:
    """A payment service without idempotency whose refund blocks until the test lets it through."""

    def __init__(self, *, times_out: bool = False) -> None:
        self.refunds: list[str] = []
        self.verified = 0
        self.started = threading.Event()
        #: The refund, once started, arms the task's execution_timeout (else the test cancels the run).
        self.times_out = times_out
        #: Set once the try was told to stop.
        self.stopped = TIMED_OUT if times_out else threading.Event()

    def find(self, key: str, arguments: Any) -> Happened | None:
        self.verified += 1
        return Happened(f"refund {key} already made") if key in self.refunds else None

    def agent(self, server: FakeOpenAIServer, *, blocks: bool) -> Agent:
        client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        agent = Agent(OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client)))

        @in_flight("verify", verify=self.find)
        @agent.tool_plain
        def refund(order: str) -> str:
            """Refund an order."""
            key = current_idempotency_key()
            if blocks:
                self.started.set()
                if self.times_out:
                    time_out_soon()
                # The refund is made well after the try was told to stop, however loaded the machine.
                assert self.stopped.wait(60)
                time.sleep(0.5)
            self.refunds.append(key)
            return f"refunded {order}"

        return agent


class Tries:
    """One storage, and a new journal per try, as a new worker has."""

    def __init__(self) -> None:
        self.storage = InMemoryStorage()
        self.journal: DurableJournal | None = None

    def attempt(self, agent: Agent) -> Any:
        self.journal = DurableJournal(self.storage)
        with journal_scope(self.journal):
            return run_durably_sync(agent, "Refund A-1.")

    async def attempt_async(self, agent: Agent) -> Any:
        self.journal = DurableJournal(self.storage)
        with journal_scope(self.journal):
            return await run_durably(agent, "Refund A-1.")

    def entry(self, key: str) -> dict[str, Any]:
        return json.loads(self.storage.entries[key])


def _tool_outputs(server: FakeOpenAIServer) -> list[str]:
    return [m["content"] for r in server.requests for m in r.body["messages"] if m["role"] == "tool"]


def _next_try_finds_the_refund(tries: Tries, payments: Payments, server: FakeOpenAIServer) -> None:
    """The call stayed in flight: the next try's verify finds the refund made, and never makes a second."""
    assert tries.entry("1.2")["state"] == "in_flight"
    result = tries.attempt(payments.agent(server, blocks=False))
    assert result.output == "Refunded."
    assert len(payments.refunds) == 1 and payments.verified == 1
    assert _tool_outputs(server) == [f"refund {payments.refunds[0]} already made"]
    assert len(server.requests) == 2  # try 1's request, and try 2's after the call it resolved
    assert tries.journal.stats.in_flight[0]["outcome"] == "it happened"


def test_a_try_stopped_by_its_timeout_while_a_plain_def_tool_runs_ends_after_the_call_and_verify_then_finds_it(
    caplog,
):
    tries, payments = Tries(), Payments(times_out=True)
    with FakeOpenAIServer([REFUND, reply.text("Refunded.")]) as server:
        with pytest.raises(TaskTimedOut), execution_timeout(), caplog.at_level(logging.WARNING):
            tries.attempt(payments.agent(server, blocks=True))

        # The refund was made before the try ended, never behind the next try's back.
        assert len(payments.refunds) == 1
        assert "the try was stopped while tool 'refund' at 1.2 ran in a thread" in caplog.text
        _next_try_finds_the_refund(tries, payments, server)


def test_a_run_cancelled_while_a_plain_def_tool_runs_ends_after_the_call_and_verify_then_finds_it():
    tries, payments = Tries(), Payments()

    async def cancelled_in_the_call() -> None:
        run = asyncio.ensure_future(tries.attempt_async(payments.agent(server, blocks=True)))
        assert await asyncio.to_thread(payments.started.wait, 60)
        run.cancel()
        payments.stopped.set()
        with pytest.raises(asyncio.CancelledError):
            await run
        # The refund was made before the cancellation ended the run.
        assert len(payments.refunds) == 1

    with FakeOpenAIServer([REFUND, reply.text("Refunded.")]) as server:
        asyncio.run(cancelled_in_the_call())
        _next_try_finds_the_refund(tries, payments, server)


def test_an_async_tool_stops_at_once_when_the_try_is_stopped():
    tries, refunds = Tries(), []
    with FakeOpenAIServer([REFUND]) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        agent = Agent(OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client)))

        @agent.tool_plain
        async def refund(order: str) -> str:
            """Refund an order."""
            time_out_soon()
            await asyncio.sleep(5)
            refunds.append(order)
            return "refunded"

        with pytest.raises(TaskTimedOut), execution_timeout():
            tries.attempt(agent)

    assert refunds == []  # it never ran to its end: nothing waited for it
    assert tries.entry("1.2")["state"] == "in_flight"
