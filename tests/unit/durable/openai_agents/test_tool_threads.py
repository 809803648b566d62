"""
A plain ``def`` tool runs in a thread that nothing stops (the SDK's ``asyncio.to_thread``). When the
try is stopped while it runs (``execution_timeout`` raises in the task's main thread, as here), the
try ends only once the call has: its effect is never made after the try, while the next try's
``verify`` looks or the call runs again; the call stays in flight for its policy.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from agents import Agent, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from tries import Task

from airflow.providers.common.ai.durable.core.in_flight import Happened
from airflow.providers.common.ai.durable.openai_agents import current_idempotency_key, in_flight
from airflow.providers.common.ai.durable.openai_agents._sdk_private import runs_in_a_thread

REFUND = function_call("refund", {"order": "A-1"}, call_id="c1")


class TaskTimedOut(Exception):
    """What Airflow's execution_timeout raises in the task's main thread."""


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


#: Set once the timeout was raised in the main thread.
TIMED_OUT = threading.Event()


def time_out_soon() -> None:
    """The task's execution_timeout passes a moment from now, while the calling tool still runs."""
    TIMED_OUT.clear()
    signal.setitimer(signal.ITIMER_REAL, 0.1)


class Payments:
    """A payment service without idempotency whose refund takes a while, in a plain def tool."""

    def __init__(self) -> None:
        self.refunds: list[str] = []
        self.verified = 0
        self.finished = threading.Event()

    def find(self, key: str, arguments: Any) -> Happened | None:
        self.verified += 1
        return Happened(f"refund {key} already made") if key in self.refunds else None

    def tool(self, *, slow: bool) -> Any:
        @in_flight("verify", verify=self.find)
        @function_tool
        def refund(order: str) -> str:
            """Refund an order."""
            key = current_idempotency_key()
            if slow:
                time_out_soon()
                # The refund is made well after the try was told to stop, however loaded the machine.
                assert TIMED_OUT.wait(60)
                time.sleep(1)
            self.refunds.append(key)
            self.finished.set()
            return f"refunded {order}"

        return refund


def agent(model: ScriptedModel, tool: Any) -> Agent:
    return Agent(name="support", model=model, tools=[tool])


def test_the_sdk_still_marks_a_plain_def_tool_as_run_in_a_thread():
    from agents import __version__

    @function_tool
    def plain() -> str:
        """Plain."""
        return "x"

    @function_tool
    async def awaited() -> str:
        """Awaited."""
        return "x"

    assert runs_in_a_thread(plain), f"openai-agents {__version__} no longer marks a plain def tool's invoker"
    assert not runs_in_a_thread(awaited)


def test_a_try_stopped_while_a_plain_def_tool_runs_ends_after_the_call_and_verify_then_finds_it(caplog):
    task, payments = Task(), Payments()
    first = ScriptedModel([[REFUND], [assistant_message("never")]])

    with pytest.raises(TaskTimedOut), execution_timeout():
        task.attempt(agent(first, payments.tool(slow=True)))

    # The refund was made before the try ended, never behind the next try's back.
    assert payments.finished.is_set() and len(payments.refunds) == 1
    assert "the try was stopped while tool 'refund' at 1.2 ran in a thread" in caplog.text
    assert len(first.calls) == 1

    # The call stays in flight: the next try's verify finds the refund already made, never a second.
    second = ScriptedModel([[assistant_message("Refunded.")]])
    result = task.attempt(agent(second, payments.tool(slow=False)))

    assert result.final_output == "Refunded."
    assert len(payments.refunds) == 1 and payments.verified == 1
    assert [call.input[-1]["output"] for call in second.calls] == [f"refund {payments.refunds[0]} already made"]
    assert task.replayed == {"model": 1} and task.ran_live == {"model": 1}


def test_an_async_tool_stops_at_once_when_the_try_is_stopped():
    task, refunds = Task(), []

    @function_tool
    async def refund(order: str) -> str:
        """Refund an order."""
        import asyncio

        time_out_soon()
        await asyncio.sleep(5)
        refunds.append(order)
        return "refunded"

    with pytest.raises(TaskTimedOut), execution_timeout():
        task.attempt(agent(ScriptedModel([[REFUND]]), refund))

    assert refunds == []  # it never ran to its end: nothing waited for it
