"""
The thread work of a running step, waited for when the call is cancelled (``core/call_threads.py``),
with no agent framework: a cancelled call whose step gave ``call_threads`` work runs to its end
first; one that gave it none is cancelled at once.
"""

from __future__ import annotations

import asyncio
import logging
import time

from airflow.providers.common.ai.durable.core.call_threads import CallThreads, call_threads, run_to_its_end
from airflow.providers.common.ai.durable.core.scope import step_scope


class Step:
    """Stands for the running ``JournalStep``: the work is noted under whatever step is running."""


def test_each_event_loop_has_one_executor_of_call_threads():
    async def executors() -> tuple[CallThreads, CallThreads]:
        return call_threads(), call_threads()

    first, again = asyncio.run(executors())
    assert first is again
    assert asyncio.run(executors())[0] is not first


def test_a_call_cancelled_while_its_thread_runs_ends_once_the_thread_has(caplog):
    done: list[str] = []

    def refund() -> str:
        time.sleep(0.5)
        done.append("refund")
        return "refunded"

    async def call() -> tuple[str | None, bool]:
        with step_scope(Step()):  # type: ignore[arg-type]
            call_threads()  # the loop's default executor, which asyncio.to_thread gives the work
            return await run_to_its_end(asyncio.to_thread(refund), "tool 'refund' at 1.2")

    async def cancelled() -> tuple[str | None, bool]:
        running = asyncio.ensure_future(call())
        await asyncio.sleep(0.1)
        running.cancel()
        result = await running
        done.append("call ended")
        return result

    with caplog.at_level(logging.WARNING):
        assert asyncio.run(cancelled()) == ("refunded", True)
    assert done == ["refund", "call ended"]
    assert "the try was stopped while tool 'refund' at 1.2 ran in a thread" in caplog.text


def test_a_call_cancelled_with_no_thread_work_of_its_step_is_cancelled_at_once(caplog):
    done: list[str] = []

    async def refund() -> str:
        await asyncio.sleep(5)
        done.append("refund")
        return "refunded"

    async def cancelled() -> tuple[str | None, bool]:
        with step_scope(Step()):  # type: ignore[arg-type]
            running = asyncio.ensure_future(run_to_its_end(refund(), "tool 'refund' at 1.2"))
            await asyncio.sleep(0.1)
            running.cancel()
            return await running

    started = time.monotonic()
    assert asyncio.run(cancelled()) == (None, True)
    assert done == [] and time.monotonic() - started < 4
    assert "ran in a thread" not in caplog.text
