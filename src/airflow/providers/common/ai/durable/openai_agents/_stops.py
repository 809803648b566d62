"""
Stops: the errors that end the try wherever they are raised (a call found in flight that fails the
task or waits for a person, a verify function that failed, a budget refusal; R-23, R-56, R-58). One
raised in a run started inside a tool call, or by an agent a tool runs (``Agent.as_tool()``), must
not end as that tool's output: a ``failure_error_function``, the SDK or the tool's own code may
catch it. So each stop is noted for the tool call running where it is raised, and that call's run
raises it again before its next model request and as it ends.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import TypeVar

_E = TypeVar("_E", bound=Exception)

# The stops raised inside the tool call running in this context.
_stops: contextvars.ContextVar[list[Exception] | None] = contextvars.ContextVar("durable_stops", default=None)


def stopping(error: _E) -> _E:
    """``error`` stops the try: noted for the tool call running in this context, if any; returned to raise."""
    if (stops := _stops.get()) is not None and not any(stop is error for stop in stops):
        stops.append(error)
    return error


class RunStopped(BaseException):
    """
    Carries ``error``, a stop, out of the SDK's run loop, which neither retries nor wraps a
    ``BaseException``. ``_agent_run.journaled`` raises ``error``.
    """

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = stopping(error)


class RunStops:
    """The stops raised inside the tool calls of one journaled run."""

    def __init__(self) -> None:
        self._first: Exception | None = None

    def check(self, *, carried: bool = True) -> None:
        """
        Raise the first stop inside this run's tool calls, or inside the call this run runs in:
        carried out of the SDK's run loop, or as it is (a streamed run hands the user its loop's
        exception as it is).
        """
        inside = _stops.get()
        stop = self._first or (inside[0] if inside else None)
        if stop is not None:
            raise RunStopped(stop) if carried else stop

    @contextlib.contextmanager
    def noting(self) -> Iterator[list[Exception]]:
        """The stops raised inside the tool call run in this block; also noted for the call this run runs in."""
        stops: list[Exception] = []
        token = _stops.set(stops)
        try:
            yield stops
        finally:
            _stops.reset(token)
            for stop in stops:
                stopping(stop)
            self._first = self._first or (stops[0] if stops else None)
