"""
The thread work of a running tool call, waited for when the try is stopped during the call.

A plain ``def`` tool runs in a thread, and nothing stops a thread: left alone after its run was
cancelled (the task's ``execution_timeout``, a kill, a sibling call's failure), the call would go
on after the try ended and could take effect while the next try's ``verify`` looks, or while the
call runs again. An adapter hands the framework :func:`call_threads` as the executor of its
threads, so that each piece of work is noted under the running step (``scope.running_step()``)
that gave it, and runs the call through :func:`run_to_its_end`, which on a cancellation waits for
that work before the try goes on ending. The call stays in flight for its policy.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from airflow.providers.common.ai.durable.core.scope import running_step

log = logging.getLogger(__name__)

T = TypeVar("T")

#: The executor of each event loop's call threads, which is also that loop's default executor.
_executors: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, CallThreads] = weakref.WeakKeyDictionary()
#: The work each running step gave a ``CallThreads``, not yet known to be done.
_work_of_steps: weakref.WeakKeyDictionary[Any, list[concurrent.futures.Future[Any]]] = weakref.WeakKeyDictionary()


class CallThreads(concurrent.futures.ThreadPoolExecutor):
    """A thread pool that notes which running step (a journaled tool call) gave it work."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future = super().submit(fn, *args, **kwargs)
        if (step := running_step()) is not None:
            futures = _work_of_steps.setdefault(step, [])
            futures[:] = [*(f for f in futures if not f.done()), future]
        return future


def call_threads() -> CallThreads:
    """
    The ``CallThreads`` of the running event loop, made its default executor the first time (so
    that ``asyncio.to_thread`` and ``loop.run_in_executor(None, ...)`` note their work too).
    """
    loop = asyncio.get_running_loop()
    executor = _executors.get(loop)
    if executor is None:
        # Public asyncio: the loop shuts its default executor down when it closes.
        executor = _executors[loop] = CallThreads()
        loop.set_default_executor(executor)
    return executor


async def run_to_its_end(awaitable: Awaitable[T], call: str) -> tuple[T | None, bool]:
    """
    The result of ``awaitable``, the running step's call (``None`` if it did not end well), and
    whether the try was stopped while it ran. Cancelled while work the step gave
    :func:`call_threads` still runs, the call runs to its end first, with a warning; cancelled
    while it runs no such work (an ``async def`` tool), it is cancelled at its next ``await``.
    """
    step = running_step()
    running = asyncio.ensure_future(awaitable)
    try:
        return await asyncio.shield(running), False
    except asyncio.CancelledError:
        work = [future for future in _work_of_steps.pop(step, []) if not future.done()] if step else []
        if running.done():
            pass
        elif work:
            log.warning(
                "Durable: the try was stopped while %s ran in a thread, which nothing stops; the try ends "
                "once the call has, so that the call never takes effect after the try",
                call,
            )
            # Blocking the loop: a framework waits only a moment for a cancelled tool call, then moves on.
            concurrent.futures.wait(work)
        else:
            running.cancel()
        while not running.done():
            # A framework cancels a stopped run's tool calls more than once: each cancel is the same stop.
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({running})
        return (None if running.cancelled() or running.exception() else running.result()), True
