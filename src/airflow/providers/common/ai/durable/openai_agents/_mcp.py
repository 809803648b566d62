"""
MCP tool calls of a durable run (R-34).

The SDK turns each tool an MCP server lists into a ``FunctionTool`` whose invocation calls
``MCPUtil.invoke_mcp_tool``, so the adapter's function-tool hook already journals an MCP call: it
is recorded when it completes, replays without reaching the server, and reruns when it raised or
was cut off. This module adds what an MCP call needs beyond that: the server is told the call's
idempotency key in the request's ``_meta``, an ``isError`` result, which the SDK hands to the
model as ordinary output, counts as a failed call, and the SDK-only custom data of the server's
``custom_data_extractor`` can be recorded with a call and given back to its replay.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from airflow.providers.common.ai.durable.core.adapter import MCP_IDEMPOTENCY_KEY_META
from airflow.providers.common.ai.durable.core.scope import running_step
from airflow.providers.common.ai.durable.openai_agents._sdk_hooks import Replacement

#: The field of a recorded MCP tool call's result that holds its custom data (a storage name: a
#: rename is a migration).
RECORDED_CUSTOM_DATA = "mcp_custom_data"

#: Names of the SDK this module relies on, by module. ``MCPUtil.invoke_mcp_tool`` is public, but
#: replacing it relies on ``MCPUtil.to_function_tool`` reading it from the class each time it
#: converts a listed tool, which the tests of this module pin; ``MCPUtil.to_function_tool`` is
#: public too, and the SDK calls it on the class for each tool a server lists.
SDK_MODULE_NAMES: dict[str, tuple[str, ...]] = {"agents.mcp.util": ("MCPUtil",)}
#: Private attributes, and a function returning an SDK object that must have each:
#: ``ToolContext._custom_data`` is where ``invoke_mcp_tool`` leaves what the server's
#: ``custom_data_extractor`` gave for a call, for the SDK to put on the call's output item; no
#: public way reads or sets it, and a replayed call must carry it as the live one did.
CUSTOM_DATA = "_custom_data"
PRIVATE_ATTRIBUTES: dict[str, Callable[[], Any]] = {CUSTOM_DATA: lambda: _a_tool_context()}


class MCPToolError(Exception):
    """An MCP tool answered with ``isError``: the call failed, though the SDK shows the model its text."""


def _a_tool_context() -> Any:
    from agents.tool_context import ToolContext

    return ToolContext(context=None, tool_name="probe", tool_call_id="probe", tool_arguments="{}")


def custom_data_to_record(context: Any) -> dict[str, Any]:
    """
    What to record beside a tool call's output: the custom data an MCP server's
    ``custom_data_extractor`` gave for it (the SDK keeps only JSON data there); ``{}`` if none.
    """
    custom_data = getattr(context, CUSTOM_DATA, None)
    return {RECORDED_CUSTOM_DATA: custom_data} if custom_data else {}


def restore_custom_data(context: Any, recorded: Any) -> None:
    """Give a replayed call the custom data its live call had; ``ValueError`` if it cannot be read."""
    if isinstance(recorded, dict) and RECORDED_CUSTOM_DATA in recorded:
        custom_data = recorded[RECORDED_CUSTOM_DATA]
        if not isinstance(custom_data, dict):
            raise ValueError(f"its MCP custom data is a {type(custom_data).__name__}, not an object")
        setattr(context, CUSTOM_DATA, custom_data)


def _is_error(result: Any) -> bool:
    # mcp 2 names the flag is_error, mcp 1 isError; the SDK supports both. Where both exist the old
    # name is a deprecated alias (FastMCP warns on reading it): read it only where it is the field.
    flag = "is_error" if hasattr(result, "is_error") else "isError"
    return bool(getattr(result, flag, None))


def _accepts_meta(call_tool: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(call_tool).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == "meta" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


class _JournaledServer:
    """
    The user's MCP server as ``invoke_mcp_tool`` sees it during one journaled call: it adds the
    call's idempotency key to the request's ``_meta`` and notes an ``isError`` result as a failure.
    Everything else is the user's server.
    """

    def __init__(self, server: Any, key: str | None, note_failure: Callable[[BaseException], None]) -> None:
        self.server = server
        self.key = key
        self.note_failure = note_failure

    async def call_tool(
        self, tool_name: str, arguments: dict[str, Any] | None, meta: dict[str, Any] | None = None
    ) -> Any:
        if self.key is not None and _accepts_meta(self.server.call_tool):
            meta = {**(meta or {}), MCP_IDEMPOTENCY_KEY_META: self.key}
            result = await self.server.call_tool(tool_name, arguments, meta=meta)
        else:
            # Called as the SDK calls it: a server written before the SDK passed _meta takes none.
            result = await self.server.call_tool(tool_name, arguments, **({} if meta is None else {"meta": meta}))
        if _is_error(result):
            self.note_failure(MCPToolError(f"MCP tool {tool_name!r} answered with isError"))
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.server, name)


def _is_the_call_of(step: Any, context: Any) -> bool:
    # An MCP call made inside a journaled call (by an agent run as a tool) is part of that call,
    # not a step of its own: it has no key of its own to send, and the call's would be shared.
    return step.kind == "tool" and step.name == getattr(context, "tool_name", None)


#: The attribute a function tool made of an MCP tool keeps its server and the tool's name under.
_ORIGIN = "_airflow_durable_mcp_origin"


def mcp_origin(tool: Any) -> tuple[Any, str] | None:
    """The MCP server a function tool was made from and the name of its tool there, if it was made from one."""
    return getattr(tool, _ORIGIN, None)


def mcp_hooks(note_failure: Callable[[BaseException], None]) -> list[Replacement]:
    """
    The replacements that route the SDK's MCP tool invocation through :class:`_JournaledServer`
    while a journaled tool call runs; ``note_failure`` marks that call as failed. Outside a
    journaled call (no durable run, or a replayed call, which never invokes) nothing changes.
    Each function tool the SDK makes of an MCP tool also keeps its server and tool name (see
    :func:`mcp_origin`), where its in-flight policy is found. Installed while a durable run runs
    (``_sdk_hooks.SDKHooks``), around the methods in place then.
    """
    from agents.mcp.util import MCPUtil

    invoke = inspect.getattr_static(MCPUtil, "invoke_mcp_tool").__func__
    to_function_tool = inspect.getattr_static(MCPUtil, "to_function_tool").__func__

    def tagged_function_tool(cls: Any, tool: Any, server: Any, *args: Any, **kwargs: Any) -> Any:
        function_tool = to_function_tool(cls, tool, server, *args, **kwargs)
        setattr(function_tool, _ORIGIN, (server, tool.name))
        return function_tool

    tagged_function_tool.__doc__ = to_function_tool.__doc__

    async def invoke_mcp_tool(cls: Any, server: Any, tool: Any, context: Any, input_json: str, **kwargs: Any) -> Any:
        step = running_step()
        if step is not None:
            key = step.idempotency_key if _is_the_call_of(step, context) else None
            server = _JournaledServer(server, key, note_failure)
        return await invoke(cls, server, tool, context, input_json, **kwargs)

    invoke_mcp_tool.__doc__ = invoke.__doc__
    return [
        Replacement(MCPUtil, "to_function_tool", classmethod(tagged_function_tool)),
        Replacement(MCPUtil, "invoke_mcp_tool", classmethod(invoke_mcp_tool)),
    ]
