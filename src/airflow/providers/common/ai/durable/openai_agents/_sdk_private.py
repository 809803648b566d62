"""
Every private name of the OpenAI Agents SDK the adapter relies on, each with why no public way
exists, and what differs between the SDK versions the provider supports (docs/airflow_lines.rst).
``tests/unit/durable/openai_agents/test_sdk_private.py`` fails, naming the SDK version and the missing
name, when an upgrade of the SDK removes one; an SDK the adapter cannot handle is refused when
the adapter is imported (``check_installed_sdk``), never replayed wrongly.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import re
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Any

from agents import FunctionTool, Model

from airflow.providers.common.ai.durable.openai_agents._sdk_hooks import Replacement

log = logging.getLogger(__name__)

#: The oldest minor of openai-agents the adapter supports and the newest it was tested with.
OLDEST_SUPPORTED = (0, 20)
NEWEST_TESTED = (0, 25)

# The TypeAdapter of a tool's declared output_type: the only place the declared type is kept.
OUTPUT_TYPE_ADAPTER = "_output_type_adapter"
# Model hooks the run loop calls on the model it holds, which is the durable wrapper: the
# wrapper forwards them so that the wrapped model behaves as it would unwrapped.
CLEANUP_ON_RUN_END = "_cleanup_on_run_end"
SUPPORTS_DEFAULT_PROMPT_CACHE_KEY = "_supports_default_prompt_cache_key"
# A streamed run closes a model provider the SDK would have created when its run ends, as the SDK
# does: only this method of the streamed result registers that (an SDK_FEATURES name).
ENSURE_MODEL_PROVIDER_CLEANUP = "_ensure_model_provider_cleanup_on_completion"

# The SDK's checks of a tool call's arguments, which raise ModelBehaviorError before the tool runs
# (arguments that are not JSON, or do not fit the tool's parameters). No attribute of the error
# says so; the function that raised it is the only sign that the model's answer, not the tool, failed.
ARGUMENT_CHECKS = frozenset(
    {
        ("agents.tool", "_parse_function_tool_json_input"),
        ("agents.tool", "_prepare_arguments"),
        # Before 0.22.3 the checks are inline in the function tool's invocation, which raises
        # ModelBehaviorError for nothing else (the tool's own error is raised in a frame below it).
        ("agents.tool", "_on_invoke_tool_impl"),
        ("agents.mcp.util", "invoke_mcp_tool"),
    }
)

#: What a model request that came back failed or incomplete used, on the ModelBehaviorError the SDK
#: raises for it (0.25 on; absent before, where such an answer's usage is counted nowhere).
TERMINAL_USAGE = "_terminal_usage"
#: The events that end a streamed answer that failed (the SDK's run loop raises on them from 0.25 on).
FAILED_RESPONSE_EVENTS = frozenset({"response.failed", "response.incomplete"})

#: Each private attribute and a function returning an SDK object that must have it.
PRIVATE_ATTRIBUTES: dict[str, Callable[[], Any]] = {
    OUTPUT_TYPE_ADAPTER: lambda: _a_function_tool(),
    CLEANUP_ON_RUN_END: lambda: Model,
    SUPPORTS_DEFAULT_PROMPT_CACHE_KEY: lambda: _an_openai_model(),
}

#: Private module-level names, by module:
#: - the three functions run_hooks replaces, and _FunctionToolInvocationResult, what the
#:   invocation returns;
#: - AgentRunner: run_durably_sync is the SDK's own run_sync around the journaled run, so the event
#:   loop, cancellation and error handling are the SDK's; only a runner subclass reaches it;
#: - the agent_tool_state functions: the only record that an agent used as a tool stopped for an
#:   approval (its tool returns as if it completed).
PRIVATE_MODULE_NAMES: dict[str, tuple[str, ...]] = {
    "agents.run_internal.run_loop": ("get_model",),
    "agents.run_internal.tool_execution": ("_invoke_function_tool_with_metadata",),
    "agents.tool": ("maybe_invoke_function_tool_failure_error_function", "_FunctionToolInvocationResult"),
    "agents.run": ("AgentRunner",),
    "agents.agent_tool_state": ("get_agent_tool_state_scope", "peek_agent_tool_run_result"),
    # The openai client's own loader of answers it does not validate: a recorded answer the SDK
    # used unvalidated (an OpenAI-compatible server left a field out) replays as it was built.
    "openai._models": ("construct_type",),
}


#: What the SDK has only from some version on, by feature: its private names, which an SDK has all
#: of or none of (some of them alone is a surface the adapter does not know). Without a feature the
#: adapter does what that SDK does:
#: - "closes its model provider" (0.22.x on): a run closes the model provider the SDK created for
#:   it (errors logged, not raised), and so does a durable run that wraps it; before, the SDK never
#:   closed it, nor does a durable run.
SDK_FEATURES: dict[str, tuple[str, ...]] = {
    "closes its model provider": (
        "agents.run_internal.model_provider_lifecycle._close_runner_owned_model_provider",
        f"agents.RunResultStreaming.{ENSURE_MODEL_PROVIDER_CLEANUP}",
    ),
}

#: The parameters each function the run hooks wrap is called with, by the wrapper and by the SDK.
HOOKED_PARAMETERS: dict[str, tuple[str, ...]] = {
    "agents.run_internal.run_loop.get_model": ("agent", "run_config"),
    "agents.run_internal.tool_execution._invoke_function_tool_with_metadata": ("function_tool", "context", "arguments"),
    "agents.tool.maybe_invoke_function_tool_failure_error_function": ("function_tool", "context", "error"),
}


class UnsupportedSDKVersion(ImportError):
    """The installed openai-agents is one whose runs the adapter cannot journal."""


def _resolved(dotted: str) -> Any | None:
    """The object a dotted name of the SDK names (a module, then attributes), or None."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for name in parts[split:]:
            found = getattr(found, name, None)
            if found is None:
                return None
        return found
    return None


@functools.cache
def has_sdk_feature(feature: str) -> bool:
    """Whether the installed SDK has ``feature`` of ``SDK_FEATURES`` (all of its names)."""
    return all(_resolved(name) is not None for name in SDK_FEATURES[feature])


def missing_private_names() -> list[str]:
    """
    The private names above that this SDK version no longer has, the parts of a feature it has
    without the rest, and the hooked functions whose parameters changed.
    """
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
    for feature, names in SDK_FEATURES.items():
        absent = [name for name in names if _resolved(name) is None]
        if absent and len(absent) < len(names):
            missing.extend(f"{name} (the rest of '{feature}' is there)" for name in absent)
    for name, expected in HOOKED_PARAMETERS.items():
        function = _resolved(name)
        if function is None:
            continue  # reported above
        hooked = getattr(function, _HOOKED, False)
        parameters = () if hooked else tuple(inspect.signature(function).parameters)
        if not hooked and parameters != expected:
            missing.append(f"{name}({', '.join(expected)}) (it takes ({', '.join(parameters)}))")
    return missing


def _minor(installed: str) -> tuple[int, int] | None:
    match = re.match(r"(\d+)\.(\d+)", installed)
    return (int(match[1]), int(match[2])) if match else None


def check_installed_sdk() -> None:
    """
    Refuse, with ``UnsupportedSDKVersion`` naming the version and the fix, an openai-agents the
    adapter cannot journal runs of: older than 0.20, a major it does not know, or one whose private
    surface changed. Log a warning for one newer than any tested whose private surface is there.
    """
    installed = version("openai-agents")
    supported = f"{OLDEST_SUPPORTED[0]}.{OLDEST_SUPPORTED[1]} to {NEWEST_TESTED[0]}.{NEWEST_TESTED[1]}"
    fix = (
        f"install an openai-agents from {supported}, the versions this provider was tested with "
        f"(pip install 'openai-agents>={OLDEST_SUPPORTED[0]}.{OLDEST_SUPPORTED[1]},<{NEWEST_TESTED[0]}.{NEWEST_TESTED[1] + 1}')"
    )
    minor = _minor(installed)
    if minor is not None and minor < OLDEST_SUPPORTED:
        raise UnsupportedSDKVersion(f"openai-agents {installed} is older than any durable runs support: {fix}")
    if minor is not None and minor[0] > NEWEST_TESTED[0]:
        raise UnsupportedSDKVersion(
            f"openai-agents {installed} is a major release this provider does not know, whose runs it "
            f"could replay wrongly: {fix}, or a provider release that supports {installed}"
        )
    if missing := missing_private_names():
        raise UnsupportedSDKVersion(
            f"openai-agents {installed} changed what durable runs rely on ({', '.join(missing)}), so "
            f"this provider cannot journal its runs: {fix}, or a provider release that supports {installed}"
        )
    if minor is None or minor > NEWEST_TESTED:
        log.warning(
            "Durable: openai-agents %s is newer than any this provider was tested with (%s); every "
            "SDK name durable runs rely on is there, so they run. If a replay misbehaves, %s",
            installed,
            supported,
            fix,
        )


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


def run_hooks(
    resolve_model: Callable[[Any, Any], Any],
    invoke_tool: Callable[..., Awaitable[Any]],
    note_failure: Callable[[BaseException], None],
) -> list[Replacement]:
    """
    The replacements that route the SDK's model resolution, function-tool invocation and tool
    failure formatting through the adapter, which acts only for runs it journals; installed while
    a durable run runs (``_sdk_hooks.SDKHooks``), around the functions in place then.

    No public extension point lets a run journal a ``Model`` the agent holds, or a tool call,
    without replacing the user's agent and tool objects with copies, which the SDK would then show
    the user (results, items, contexts, hooks, run states).
    """
    import agents.run_internal.run_loop as run_loop
    import agents.run_internal.tool_execution as tool_execution
    import agents.tool as tool_module

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
    return [
        Replacement(run_loop, "get_model", hooked_get_model),
        Replacement(tool_execution, "_invoke_function_tool_with_metadata", hooked_invoke),
        Replacement(tool_module, "maybe_invoke_function_tool_failure_error_function", hooked_format_failure),
    ]


def invocation_result(output: Any) -> Any:
    """What the SDK's function-tool invocation returns for ``output`` (a replayed one)."""
    from agents.tool import _FunctionToolInvocationResult

    return _FunctionToolInvocationResult(output)


async def close_runner_owned_model_provider(provider: Any) -> None:
    """Close a provider the SDK would have created for the run, as the SDK closes it (if it does)."""
    if not has_sdk_feature("closes its model provider"):
        return
    from agents.run_internal.model_provider_lifecycle import _close_runner_owned_model_provider

    await _close_runner_owned_model_provider(provider)


def ensure_model_provider_cleanup(result: Any, cleanup: Callable[[], Awaitable[None]]) -> None:
    """Have a streamed result run ``cleanup`` when its run ends, as for a provider the SDK created (if it does)."""
    if has_sdk_feature("closes its model provider"):
        getattr(result, ENSURE_MODEL_PROVIDER_CLEANUP)(cleanup)


def unvalidated_output_item(item: dict[str, Any]) -> Any:
    """A model answer's output item built as the ``openai`` client builds it: by its type, unvalidated."""
    from openai._models import construct_type
    from openai.types.responses import ResponseOutputItem

    return construct_type(type_=ResponseOutputItem, value=item)


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


@functools.cache
def masks_tracing_from_the_start_of_an_untraced_run() -> bool:
    """
    Whether a run with tracing disabled masks the caller's tracing from its start, its session
    reads included (0.24 on); before, it reads its session under the caller's trace. The change is
    inside ``AgentRunner.run`` and leaves no name to look for, so this one is keyed by version.
    """
    minor = _minor(version("openai-agents"))
    return minor is None or minor >= (0, 24)


def declared_output_adapter(tool: FunctionTool) -> Any | None:
    """The pydantic TypeAdapter of the tool's declared ``output_type``, if it declared one."""
    return getattr(tool, OUTPUT_TYPE_ADAPTER, None)


def runs_in_a_thread(tool: Any) -> bool:
    """
    Whether the SDK runs ``tool``'s function in a thread (a plain ``def`` under ``@function_tool``),
    which a cancelled run cannot stop: only the SDK's private marker on its invoker says so.
    """
    from agents import tool as sdk_tool

    marker = getattr(sdk_tool, "_SYNC_FUNCTION_TOOL_MARKER", None)
    return marker is not None and bool(getattr(getattr(tool, "on_invoke_tool", None), marker, False))
