"""
Every private name of the OpenAI Agents SDK the adapter relies on, each with why no public way
exists. ``tests/unit/durable/test_sdk_private.py`` fails, naming the SDK version and the missing
name, when an upgrade of the SDK removes one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agents import FunctionTool, Model

# FunctionTool fields: a copy of a tool must tell a custom failure_error_function (which turns an
# exception into text for the model) from the default; the SDK keeps that only in these fields.
FAILURE_ERROR_FUNCTION = "_failure_error_function"
USES_DEFAULT_FAILURE_ERROR_FUNCTION = "_use_default_failure_error_function"
# Set on the ToolContext when the default failure handler turned the tool's exception into text;
# no public result says a tool's output is an error message.
DEFAULT_FAILURE_HANDLED = "_function_tool_default_failure_handled"
# The TypeAdapter of a tool's declared output_type: the only place the declared type is kept.
OUTPUT_TYPE_ADAPTER = "_output_type_adapter"
# Model hooks the run loop calls on the model it holds, which is the durable wrapper: the
# wrapper forwards them so that the wrapped model behaves as it would unwrapped.
CLEANUP_ON_RUN_END = "_cleanup_on_run_end"
SUPPORTS_DEFAULT_PROMPT_CACHE_KEY = "_supports_default_prompt_cache_key"

# The SDK's invoker of a function tool calls it with each exception its failure policy turned
# into text for the model, whatever the policy; nothing public says a tool call failed that way.
HANDLED_ERROR_CALLBACK = "_on_handled_error"

#: Each private attribute and a function returning an SDK object that must have it.
PRIVATE_ATTRIBUTES: dict[str, Callable[[], Any]] = {
    FAILURE_ERROR_FUNCTION: lambda: _a_function_tool(),
    USES_DEFAULT_FAILURE_ERROR_FUNCTION: lambda: _a_function_tool(),
    OUTPUT_TYPE_ADAPTER: lambda: _a_function_tool(),
    HANDLED_ERROR_CALLBACK: lambda: _a_function_tool().on_invoke_tool,
    CLEANUP_ON_RUN_END: lambda: Model,
    SUPPORTS_DEFAULT_PROMPT_CACHE_KEY: lambda: _an_openai_model(),
}


#: Private module-level names, by module. AgentRunner: run_durably_sync is the SDK's own run_sync
#: around the journaled run, so the event loop, cancellation and error handling are the SDK's;
#: only a runner subclass reaches it. _close_runner_owned_model_provider: a run that wraps a
#: provider the SDK would have created closes it as the SDK does (errors logged, not raised).
#: The agent_tool_state functions: the only record that an agent used as a tool stopped for an
#: approval (its tool returns as if it completed).
PRIVATE_MODULE_NAMES: dict[str, tuple[str, ...]] = {
    "agents.run": ("AgentRunner",),
    "agents.run_internal.model_provider_lifecycle": ("_close_runner_owned_model_provider",),
    "agents.agent_tool_state": ("get_agent_tool_state_scope", "peek_agent_tool_run_result"),
}


def missing_private_names() -> list[str]:
    """The private names above that this SDK version no longer has."""
    import importlib

    import agents.tool

    missing = [name for name, owner in PRIVATE_ATTRIBUTES.items() if not hasattr(owner(), name)]
    if getattr(agents.tool, "_DEFAULT_FAILURE_HANDLED_ATTR", None) != DEFAULT_FAILURE_HANDLED:
        missing.append(DEFAULT_FAILURE_HANDLED)
    for module_name, names in PRIVATE_MODULE_NAMES.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            missing.extend(f"{module_name}.{name}" for name in names)
            continue
        missing.extend(f"{module_name}.{name}" for name in names if not hasattr(module, name))
    return missing


def _a_function_tool() -> FunctionTool:
    from agents import function_tool

    def probe() -> str:
        """A probe."""
        return ""

    return function_tool(probe)


def _an_openai_model() -> Model:
    from agents import OpenAIResponsesModel
    from openai import AsyncOpenAI

    return OpenAIResponsesModel("gpt-4.1", AsyncOpenAI(api_key="unused", base_url="http://127.0.0.1:9"))


def default_failure_was_handled(context: Any) -> bool:
    """Whether the SDK's default failure handler turned this tool call's exception into text."""
    # The SDK sets it on the ToolContext in maybe_invoke_function_tool_failure_error_function.
    return bool(getattr(context, DEFAULT_FAILURE_HANDLED, False))


def custom_failure_formatter(tool: FunctionTool) -> Any | None:
    """The tool's own failure_error_function, or ``None`` when it uses the SDK's default (or none)."""
    if getattr(tool, USES_DEFAULT_FAILURE_ERROR_FUNCTION):
        return None
    return getattr(tool, FAILURE_ERROR_FUNCTION)


def set_custom_failure_formatter(tool: FunctionTool, formatter: Any) -> None:
    setattr(tool, FAILURE_ERROR_FUNCTION, formatter)


def note_handled_failures(invoker: Any, note: Callable[[BaseException], None]) -> bool:
    """
    Have the SDK's invoker of a (copied) function tool call ``note`` with each exception it turns
    into text for the model; ``False`` when the invoker is not the SDK's.
    """
    handled = getattr(invoker, HANDLED_ERROR_CALLBACK, None)
    if not callable(handled):
        return False

    def noting(function_tool: Any, error: BaseException, arguments: str, context: Any) -> Any:
        note(error)
        return handled(function_tool, error, arguments, context)

    setattr(invoker, HANDLED_ERROR_CALLBACK, noting)
    return True


async def close_runner_owned_model_provider(provider: Any) -> None:
    """Close a provider the SDK would have created for the run, as the SDK closes it."""
    from agents.run_internal.model_provider_lifecycle import _close_runner_owned_model_provider

    await _close_runner_owned_model_provider(provider)


def nested_agent_run_was_interrupted(context: Any) -> bool:
    """Whether the agent that this tool call ran as a tool (``Agent.as_tool()``) stopped for an approval."""
    from agents.agent_tool_state import get_agent_tool_state_scope, peek_agent_tool_run_result

    tool_call = getattr(context, "tool_call", None)
    if tool_call is None:
        return False
    result = peek_agent_tool_run_result(tool_call, scope_id=get_agent_tool_state_scope(context))
    return bool(getattr(result, "interruptions", None))


def declared_output_adapter(tool: FunctionTool) -> Any | None:
    """The pydantic TypeAdapter of the tool's declared ``output_type``, if it declared one."""
    return getattr(tool, OUTPUT_TYPE_ADAPTER, None)
