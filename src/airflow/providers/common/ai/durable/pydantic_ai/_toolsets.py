"""
Tools of any toolset in a journaled Pydantic AI run (a ``FunctionToolset``, an MCP server, a
toolset of the user's own, any of them prefixed, renamed, filtered or wrapped), and the in-flight
policy of each. Every tool call goes through the run capability's ``wrap_tool_execute`` whatever
its toolset, so each is journaled alike; what differs is where its policy is found: on its tool
function, or on the toolset it comes from (``in_flight(...)(toolset)``, its ``tools`` overriding it
for some tools), which is known only once the run lists its tools. An MCP server is told the call's
idempotency key by :func:`send_idempotency_key`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, PrefixedToolset, RenamedToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from airflow.providers.common.ai.durable.core.adapter import MCP_IDEMPOTENCY_KEY_META
from airflow.providers.common.ai.durable.core.in_flight import InFlightPolicy, attached_policy
from airflow.providers.common.ai.durable.core.scope import running_step


@dataclass
class ToolsOffered(WrapperToolset[Any]):
    """
    The run's assembled toolset, unchanged: it notes, for each tool the model is offered, the
    toolset it comes from, where its policy is looked up (:func:`policy_found`).
    """

    #: The toolset each offered tool comes from, by the name the model calls it by; shared by the
    #: copies Pydantic AI makes of this toolset for each run step.
    origins: dict[str, AbstractToolset[Any]] = field(default_factory=dict)

    async def get_tools(self, ctx: Any) -> dict[str, ToolsetTool[Any]]:
        tools = await super().get_tools(ctx)
        self.origins.update({name: tool.toolset for name, tool in tools.items()})
        return tools


def policy_found(toolset: AbstractToolset[Any], name: str) -> InFlightPolicy | None:
    """
    The in-flight policy of the tool ``name`` that ``toolset`` offers: its tool function's, else
    that of the nearest toolset on the way to it that names one (for the tool's name there), else
    ``None``. A prefix or a renaming on the way is undone to find the tool beneath it.
    """
    on_the_way: list[tuple[AbstractToolset[Any], str]] = []
    while True:
        on_the_way.append((toolset, name))
        if isinstance(toolset, PrefixedToolset):
            name = name.removeprefix(f"{toolset.prefix}_")
        elif isinstance(toolset, RenamedToolset):
            name = toolset.name_map.get(name, name)
        if not isinstance(toolset, WrapperToolset):
            break
        toolset = toolset.wrapped
    if isinstance(toolset, FunctionToolset) and (tool := toolset.tools.get(name)) is not None:
        policy = attached_policy(tool.function)
        if policy is not None:
            return policy
    for offering, its_name in reversed(on_the_way):
        policy = attached_policy(offering)
        if policy is not None:
            return policy.for_tool(its_name)
    return None


async def send_idempotency_key(ctx: Any, call_tool: Any, name: str, args: dict[str, Any]) -> Any:
    """
    A ``process_tool_call`` for Pydantic AI's ``MCPToolset``: inside a journaled tool call the server
    gets the call's idempotency key in the request's ``_meta`` (under
    ``airflow.apache.org/idempotency-key``), the same on every try, so that a server with side
    effects can recognise a repeat; outside one the call goes as it is::

        MCPToolset("http://payments:8000/mcp", process_tool_call=send_idempotency_key)

    A ``process_tool_call`` of your own can do the same with ``current_idempotency_key()``.
    """
    step = running_step()
    if step is None or step.kind != "tool":
        return await call_tool(name, args)
    return await call_tool(name, args, metadata={MCP_IDEMPOTENCY_KEY_META: step.idempotency_key})
