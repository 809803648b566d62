"""
Every private name of the OpenAI Agents SDK the adapter relies on, each with why no public way
exists. ``tests/unit/durable/test_sdk_private.py`` fails, naming the SDK version and the missing
name, when an upgrade of the SDK removes one.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from typing import Any

from agents import FunctionTool, Model

# The TypeAdapter of a tool's declared output_type: the only place the declared type is kept.
OUTPUT_TYPE_ADAPTER = "_output_type_adapter"
# Model hooks the run loop calls on the model it holds, which is the durable wrapper: the
# wrapper forwards them so that the wrapped model behaves as it would unwrapped.
CLEANUP_ON_RUN_END = "_cleanup_on_run_end"
SUPPORTS_DEFAULT_PROMPT_CACHE_KEY = "_supports_default_prompt_cache_key"
# A streamed run closes a model provider the SDK would have created when its run ends, as the SDK
# does: only this method of the streamed result registers that.
ENSURE_MODEL_PROVIDER_CLEANUP = "_ensure_model_provider_cleanup_on_completion"

# The SDK's checks of a tool call's arguments, which raise ModelBehaviorError before the tool runs
# (arguments that are not JSON, or do not fit the tool's parameters). No attribute of the error
# says so; the function that raised it is the only sign that the model's answer, not the tool, failed.
ARGUMENT_CHECKS = frozenset(
    {
        ("agents.tool", "_parse_function_tool_json_input"),
        ("agents.tool", "_prepare_arguments"),
        ("agents.mcp.util", "invoke_mcp_tool"),
    }
)

#: Each private attribute and a function returning an SDK object that must have it.
PRIVATE_ATTRIBUTES: dict[str, Callable[[], Any]] = {
    OUTPUT_TYPE_ADAPTER: lambda: _a_function_tool(),
    CLEANUP_ON_RUN_END: lambda: Model,
    SUPPORTS_DEFAULT_PROMPT_CACHE_KEY: lambda: _an_openai_model(),
    ENSURE_MODEL_PROVIDER_CLEANUP: lambda: _streamed_result_class(),
}

#: Private module-level names, by module:
#: - the three functions install_run_hooks wraps, and _FunctionToolInvocationResult, what the
#:   invocation returns;
#: - _close_runner_owned_model_provider: a run that wraps a provider the SDK would have created
#:   closes it as the SDK does (errors logged, not raised);
#: - AgentRunner: run_durably_sync is the SDK's own run_sync around the journaled run, so the event
#:   loop, cancellation and error handling are the SDK's; only a runner subclass reaches it;
#: - the agent_tool_state functions: the only record that an agent used as a tool stopped for an
#:   approval (its tool returns as if it completed).
PRIVATE_MODULE_NAMES: dict[str, tuple[str, ...]] = {
    "agents.run_internal.run_loop": ("get_model",),
    "agents.run_internal.tool_execution": ("_invoke_function_tool_with_metadata",),
    "agents.tool": ("maybe_invoke_function_tool_failure_error_function", "_FunctionToolInvocationResult"),
    "agents.run_internal.model_provider_lifecycle": ("_close_runner_owned_model_provider",),
    "agents.run": ("AgentRunner",),
    "agents.agent_tool_state": ("get_agent_tool_state_scope", "peek_agent_tool_run_result"),
    # The openai client's own loader of answers it does not validate: a recorded answer the SDK
    # used unvalidated (an OpenAI-compatible server left a field out) replays as it was built.
    "openai._models": ("construct_type",),
}


def missing_private_names() -> list[str]:
    """The private names above that this SDK version no longer has."""
    from airflow.providers.common.ai.durable.openai_agents import _mcp

    attributes = {**PRIVATE_ATTRIBUTES, **_mcp.PRIVATE_ATTRIBUTES}
    missing = [name for name, owner in attributes.items() if not hasattr(owner(), name)]
    for module_name, names in {**PRIVATE_MODULE_NAMES, **_mcp.SDK_MODULE_NAMES}.items():
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


_HOOKED = "_airflow_durable_hook"


def install_run_hooks(
    resolve_model: Callable[[Any, Any], Any],
    invoke_tool: Callable[..., Awaitable[Any]],
    note_failure: Callable[[BaseException], None],
) -> None:
    """
    Route, once per process, the SDK's model resolution, function-tool invocation and tool failure
    formatting through the adapter, which acts only for runs it journals.

    No public extension point lets a run journal a ``Model`` the agent holds, or a tool call,
    without replacing the user's agent and tool objects with copies, which the SDK would then show
    the user (results, items, contexts, hooks, run states).
    """
    import agents.run_internal.run_loop as run_loop
    import agents.run_internal.tool_execution as tool_execution
    import agents.tool as tool_module

    if getattr(run_loop.get_model, _HOOKED, False):
        return
    get_model = run_loop.get_model
    invoke = tool_execution._invoke_function_tool_with_metadata
    format_failure = tool_module.maybe_invoke_function_tool_failure_error_function

    def hooked_get_model(agent: Any, run_config: Any) -> Any:
        return resolve_model(get_model(agent, run_config), run_config)

    async def hooked_invoke(*, function_tool: Any, context: Any, arguments: str) -> Any:
        return await invoke_tool(invoke, function_tool=function_tool, context=context, arguments=arguments)

    async def hooked_format_failure(*, function_tool: Any, context: Any, error: BaseException) -> Any:
        result = await format_failure(function_tool=function_tool, context=context, error=error)
        if result is not None:
            note_failure(error)
        return result

    for hook in (hooked_get_model, hooked_invoke, hooked_format_failure):
        setattr(hook, _HOOKED, True)
    run_loop.get_model = hooked_get_model
    tool_execution._invoke_function_tool_with_metadata = hooked_invoke
    tool_module.maybe_invoke_function_tool_failure_error_function = hooked_format_failure


def invocation_result(output: Any) -> Any:
    """What the SDK's function-tool invocation returns for ``output`` (a replayed one)."""
    from agents.tool import _FunctionToolInvocationResult

    return _FunctionToolInvocationResult(output)


async def close_runner_owned_model_provider(provider: Any) -> None:
    """Close a provider the SDK would have created for the run, as the SDK closes it."""
    from agents.run_internal.model_provider_lifecycle import _close_runner_owned_model_provider

    await _close_runner_owned_model_provider(provider)


def ensure_model_provider_cleanup(result: Any, cleanup: Callable[[], Awaitable[None]]) -> None:
    """Have a streamed result run ``cleanup`` when its run ends, as for a provider the SDK created."""
    getattr(result, ENSURE_MODEL_PROVIDER_CLEANUP)(cleanup)


def unvalidated_output_item(item: dict[str, Any]) -> Any:
    """A model answer's output item built as the ``openai`` client builds it: by its type, unvalidated."""
    from openai._models import construct_type
    from openai.types.responses import ResponseOutputItem

    return construct_type(type_=ResponseOutputItem, value=item)


def _streamed_result_class() -> Any:
    from agents import RunResultStreaming

    return RunResultStreaming


def nested_agent_run_was_interrupted(context: Any) -> bool:
    """Whether the agent that this tool call ran as a tool (``Agent.as_tool()``) stopped for an approval."""
    from agents.agent_tool_state import get_agent_tool_state_scope, peek_agent_tool_run_result

    tool_call = getattr(context, "tool_call", None)
    if tool_call is None:
        return False
    result = peek_agent_tool_run_result(tool_call, scope_id=get_agent_tool_state_scope(context))
    return bool(getattr(result, "interruptions", None))


def raised_checking_arguments(error: BaseException) -> bool:
    """Whether the SDK raised ``error`` checking a tool call's arguments, before the tool ran."""
    traceback = error.__traceback__
    if traceback is None:
        return False
    while traceback.tb_next is not None:
        traceback = traceback.tb_next
    frame = traceback.tb_frame
    return (frame.f_globals.get("__name__"), frame.f_code.co_name) in ARGUMENT_CHECKS


def declared_output_adapter(tool: FunctionTool) -> Any | None:
    """The pydantic TypeAdapter of the tool's declared ``output_type``, if it declared one."""
    return getattr(tool, OUTPUT_TYPE_ADAPTER, None)
