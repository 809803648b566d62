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

#: Each private attribute and a function returning an SDK object that must have it.
PRIVATE_ATTRIBUTES: dict[str, Callable[[], Any]] = {
    FAILURE_ERROR_FUNCTION: lambda: _a_function_tool(),
    USES_DEFAULT_FAILURE_ERROR_FUNCTION: lambda: _a_function_tool(),
    OUTPUT_TYPE_ADAPTER: lambda: _a_function_tool(),
    CLEANUP_ON_RUN_END: lambda: Model,
    SUPPORTS_DEFAULT_PROMPT_CACHE_KEY: lambda: _an_openai_model(),
}


def missing_private_names() -> list[str]:
    """The private names above that this SDK version no longer has."""
    import agents.tool

    missing = [name for name, owner in PRIVATE_ATTRIBUTES.items() if not hasattr(owner(), name)]
    if getattr(agents.tool, "_DEFAULT_FAILURE_HANDLED_ATTR", None) != DEFAULT_FAILURE_HANDLED:
        missing.append(DEFAULT_FAILURE_HANDLED)
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


def declared_output_adapter(tool: FunctionTool) -> Any | None:
    """The pydantic TypeAdapter of the tool's declared ``output_type``, if it declared one."""
    return getattr(tool, OUTPUT_TYPE_ADAPTER, None)
