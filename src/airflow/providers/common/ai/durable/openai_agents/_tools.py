"""
Function tools in a journaled run: the failures a tool's failure policy turned into text for the
model while the call runs, and the policy a tool (or an MCP server) names for a call of it found
in flight (:func:`in_flight`).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

from airflow.providers.common.ai.durable.core.call_threads import call_threads, run_to_its_end
from airflow.providers.common.ai.durable.core.in_flight import (
    DEFAULT_POLICY,
    RERUN,
    InFlightPolicy,
    Verified,
    attach_policy,
    attached_policy,
)
from airflow.providers.common.ai.durable.openai_agents._mcp import mcp_origin
from airflow.providers.common.ai.durable.openai_agents._sdk_private import raised_checking_arguments, runs_in_a_thread

TOOL_FAILURE = "_airflow_durable_tool_failure"

# The exceptions a tool's failure policy turned into text for the model, while that tool call runs.
_handled_failures: contextvars.ContextVar[list[BaseException] | None] = contextvars.ContextVar(
    "durable_handled_failures", default=None
)


def note_failure(error: BaseException) -> None:
    if (failures := _handled_failures.get()) is not None:
        failures.append(error)


@contextlib.contextmanager
def noting_failures() -> Iterator[list[BaseException]]:
    """The failures a tool's failure policy turned into text inside this block (one tool call)."""
    failures: list[BaseException] = []
    token = _handled_failures.set(failures)
    try:
        yield failures
    finally:
        _handled_failures.reset(token)


def in_flight(
    policy: str = RERUN,
    *,
    verify: Callable[[str, Any], Verified | Awaitable[Verified]] | None = None,
    safe_to_repeat: bool = False,
    tools: Mapping[str, InFlightPolicy] | None = None,
) -> _ToolPolicy:
    """
    What a retry does with a call of a tool that was in flight when a try died (R-56): ``"rerun"``
    (the default: it runs again with the same idempotency key; ``safe_to_repeat=True`` says so
    without a warning), ``"verify"`` (``verify(idempotency_key, arguments)`` returns
    ``Happened(output)`` if the effect happened, the call then does not run and the model gets
    ``output``, or ``None`` if it did not, and the call runs; sync or async), ``"ask"`` (a person
    decides through a human-in-the-loop request; ``AgentOperator(durable=True)`` only) or
    ``"fail"`` (the task fails for good, the journal kept).

    Apply it to a function tool, above ``@function_tool``, or to an MCP server, whose ``tools``
    map names of its tools to policies of their own::

        @in_flight("verify", verify=refund_issued)
        @function_tool
        def issue_refund(order_id: str, amount: float) -> str: ...


        payments = in_flight("ask", tools={"get_balance": in_flight(safe_to_repeat=True)})(
            MCPServerStreamableHttp(...)
        )

    A tool with a policy other than ``rerun`` starts only once its in-flight mark is in the store.
    """
    return _ToolPolicy(policy, verify, safe_to_repeat, tools or {})


class _ToolPolicy(InFlightPolicy):
    """An in-flight policy that applies itself to a function tool or an MCP server."""

    def __call__(self, target: Any) -> Any:
        from agents import FunctionTool
        from agents.mcp import MCPServer

        if isinstance(target, FunctionTool) and self.tools:
            raise TypeError("in_flight(..., tools=...) applies to an MCP server; a function tool takes a policy alone")
        if not isinstance(target, (FunctionTool, MCPServer)):
            raise TypeError(
                "in_flight(...) applies to a function tool (put it above @function_tool) or an MCP server, "
                f"not {type(target).__name__}"
            )
        return attach_policy(target, self)


def policy_of(tool: Any) -> InFlightPolicy:
    """The in-flight policy of a function tool: its own, its MCP server's (for that tool), or ``rerun``."""
    policy = attached_policy(tool)
    if policy is not None:
        return policy
    origin = mcp_origin(tool)
    if origin is not None:
        server, name = origin
        policy = attached_policy(server)
        if policy is not None:
            return policy.for_tool(name)
    return DEFAULT_POLICY


async def invoked_to_its_end(invoke: Callable[[], Awaitable[Any]], tool: Any, call: str) -> tuple[Any, bool]:
    """
    The result of one tool call (``None`` if it did not end well), and whether the try was stopped
    while it ran. A plain ``def`` tool runs in a thread that nothing stops: when the run is
    cancelled meanwhile (the task's ``execution_timeout``, a kill, a sibling call's failure), the
    call runs to its end first, so that it never takes effect after the try ended, while the next
    try's ``verify`` looks or the call runs again; it stays in flight for that policy. An
    ``async def`` tool stops at its next ``await``.
    """
    from agents.exceptions import ModelBehaviorError

    try:
        return await _invoked_to_its_end(invoke, tool, call)
    except ModelBehaviorError as error:
        # Raised by the tool's own code, it is the tool's failure: the answer that asked for it
        # still replays. Raised checking the answer's arguments, it is the model's.
        if not raised_checking_arguments(error):
            setattr(error, TOOL_FAILURE, True)
        raise


async def _invoked_to_its_end(invoke: Callable[[], Awaitable[Any]], tool: Any, call: str) -> tuple[Any, bool]:
    if not runs_in_a_thread(tool):
        return await invoke(), False
    # The SDK's asyncio.to_thread runs the tool in the loop's default executor, which this makes the noting one.
    call_threads()
    return await run_to_its_end(invoke(), call)
