"""
Tools of a journaled Pydantic AI run: the in-flight policy a tool or a toolset names
(:func:`in_flight`, attached with the core's ``attach_policy``), the policies of an agent's function
tools, and the tool outputs a replay can hand back unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from pydantic_ai import Tool
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset

from airflow.providers.common.ai.durable.core.in_flight import (
    RERUN,
    InFlightPolicy,
    Verified,
    attach_policy,
    attached_policy,
)

#: How deep a recorded output may nest: deeper ones run live on every try.
_DEPTH = 200


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
    ``Happened(output)`` when the effect happened, and the tool does not run, or ``None``, and it
    runs), ``"ask"`` (a person decides through human-in-the-loop, when an operator that can wait
    for a person runs the agent; else the task fails at the call) or ``"fail"`` (the task fails
    for good, the journal kept).

    Put it above ``@agent.tool`` / ``@agent.tool_plain`` (or apply it to a ``Tool``), or apply it
    to a toolset (an MCP server, a toolset of your own), whose ``tools`` map names of its tools to
    policies of their own; a tool function's own policy wins over its toolset's::

        @in_flight("verify", verify=refund_issued)
        @agent.tool_plain
        def issue_refund(order_id: str, amount: float) -> str: ...


        payments = in_flight("fail", tools={"get_balance": in_flight(safe_to_repeat=True)})(payments_toolset)
    """
    return _ToolPolicy(policy, verify, safe_to_repeat, tools or {})


class _ToolPolicy(InFlightPolicy):
    """An in-flight policy that attaches itself to a tool function, a ``Tool`` or a toolset."""

    def __call__(self, target: Any) -> Any:
        if isinstance(target, AbstractToolset):
            return attach_policy(target, self)
        if self.tools:
            raise TypeError("in_flight(..., tools=...) applies to a toolset; a tool function takes a policy alone")
        if not (isinstance(target, Tool) or callable(target)):
            raise TypeError(
                f"in_flight(...) applies to a tool function, a Tool or a toolset, not {type(target).__name__}"
            )
        attach_policy(target.function if isinstance(target, Tool) else target, self)
        return target


def policies_of(toolsets: Iterable[AbstractToolset[Any]]) -> dict[str, InFlightPolicy]:
    """The in-flight policy each function tool of ``toolsets`` names, by tool name."""
    policies: dict[str, InFlightPolicy] = {}

    def visit(toolset: AbstractToolset[Any]) -> None:
        if isinstance(toolset, FunctionToolset):
            for name, tool in toolset.tools.items():
                policy = attached_policy(tool.function)
                if policy is not None:
                    policies[name] = policy

    for toolset in toolsets:
        toolset.apply(visit)
    return policies


def why_not_recordable(value: Any, depth: int = 0) -> str | None:
    """
    Why a tool's output cannot come back unchanged from JSON, or ``None``: only JSON's own types
    (``None``, ``bool``, ``int``, finite ``float``, ``str``, ``list``, ``dict`` with ``str`` keys)
    are recorded, so a replay hands the model and the message history an equal value of the same type.
    """
    if depth > _DEPTH:
        return f"it nests more than {_DEPTH} levels deep"
    if value is None or type(value) in (bool, int, str):
        return None
    if type(value) is float:
        return None if math.isfinite(value) else "it holds a float that is not finite"
    if type(value) is list:
        return next(filter(None, (why_not_recordable(item, depth + 1) for item in value)), None)
    if type(value) is dict:
        if not all(type(key) is str for key in value):
            return "it holds a dict whose keys are not all str"
        return next(filter(None, (why_not_recordable(item, depth + 1) for item in value.values())), None)
    return (
        f"it returned a {type(value).__name__}; only JSON's own types (None, bool, int, float, str, "
        "list, dict with str keys) replay as the same value"
    )
